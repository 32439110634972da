"""How a bad setting is told: the key, the value as a message may show it (no password, no whole section), what
is allowed, and the environment variable that sets it."""

from __future__ import annotations

import os
import re
from typing import Any

from store.settings.urls import without_credentials

__all__ = ["ENV_PREFIX", "describe", "env_problem"]

ENV_PREFIX = "VECTORSYNC_"
#: A setting whose value is never shown: a key, password, secret or token (not a count of tokens).
_SECRET_NAME = re.compile(r"key|password|secret|token(?!s)")


def describe(error: Any) -> str:
    if not error["loc"]:
        return str(error["msg"]).removeprefix("Value error, ")
    loc = ".".join(str(part) for part in error["loc"])
    env = ENV_PREFIX + "__".join(str(part).upper() for part in error["loc"])
    if error["type"] == "extra_forbidden":
        return f"unknown setting {loc!r}: remove it or check its spelling (env {env})"
    if error["type"] == "missing":
        return f"setting {loc!r} is required (env {env})"
    if error["loc"][-1] == "api_key_env":  # someone pasted the key where its variable's name goes: never echo it
        return (
            f"setting {loc} must name the environment variable that holds the key (letters, digits and _), "
            f'not hold the key itself: export MY_KEY=... and set {loc} = "MY_KEY" (env {env})'
        )
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"setting {loc} = {_shown(error.get('input'), error['loc'])} is not allowed: {message} (env {env})"


def _shown(value: Any, loc: tuple[Any, ...] = ()) -> str:
    """A bad value as a message may show it: no whole sections (they hold URLs), no passwords or keys."""
    if loc and _SECRET_NAME.search(str(loc[-1])):
        return "<hidden>"
    if isinstance(value, dict | list):
        return f"<{type(value).__name__}>"
    if isinstance(value, str) and "://" in value:
        return repr(without_credentials(value))
    return repr(value)


def env_problem(message: str) -> str:
    """Which environment variables pydantic-settings could not read, with their values (secrets hidden)."""
    named = re.search(r'field "(\w+)"', message)
    prefix = ENV_PREFIX + (named.group(1).upper() if named else "")
    found = sorted(k for k in os.environ if k.upper().startswith(prefix) and k.upper() != f"{ENV_PREFIX}CONFIG")
    shown = ", ".join(f"{k}={_shown(os.environ[k], (k.lower(),))}" for k in found)
    return f"bad settings in the environment ({shown or message})"
