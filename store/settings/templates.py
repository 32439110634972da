"""What a SQL source reads: the columns its text template names (the source and change capture agree on it)."""

from __future__ import annotations

import string

from store.errors import ConfigError

__all__ = ["template_fields"]


def template_fields(template: str) -> list[str]:
    """The fields ``template`` formats (``"{title}\\n{body}"``: title, body). Raises ConfigError for a bad one."""
    try:
        return [name for _, name, _, _ in string.Formatter().parse(template) if name]
    except ValueError as exc:
        raise ConfigError(f"source text template {template!r} is not valid: {exc}") from None
