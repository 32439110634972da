"""What of the settings nobody chose: the keys no settings file or ``VECTORSYNC_*`` variable set, and a doctor
check said to rest on such defaults (``default``, not ``ok``): a part that answers on a default is not a part
anyone configured."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from store.settings import Settings

#: A doctor check (``producer.cli.doctor.Check``): a dataclass with ``status`` and ``detail``.
C = TypeVar("C", bound=Any)

__all__ = ["all_unset", "defaulted", "unset"]


def unset(settings: Settings, *keys: str) -> tuple[str, ...]:
    """The settings of ``keys`` (``section.key``, or a top-level ``models``) that no settings file or
    ``VECTORSYNC_*`` variable set: pydantic-settings' ``model_fields_set`` tells, section by section."""
    left = []
    for key in keys:
        section, _, name = key.partition(".")
        if section not in settings.model_fields_set or (
            name and name not in getattr(settings, section).model_fields_set
        ):
            left.append(key)
    return tuple(left)


def defaulted(check: C, keys: tuple[str, ...]) -> C:
    """``check`` said to rest on defaults when every one of ``keys`` is unset: ``default`` instead of ``ok``."""
    if not keys:
        return check
    note = f" (default: {' and '.join(keys)} not set in any settings file or VECTORSYNC_* variable)"
    return replace(check, status="default" if check.status == "ok" else check.status, detail=check.detail + note)


def all_unset(settings: Settings, *keys: str) -> tuple[str, ...]:
    """``keys`` when none of them is set, else nothing: a part placed by any one of them was configured."""
    left = unset(settings, *keys)
    return left if len(left) == len(keys) else ()
