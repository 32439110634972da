"""JSON a person typed (a ``--filter``, a line of an eval queries file): parsed, or refused in one line.

Python's JSON reader recurses once per level: text nested a thousand levels deep raised RecursionError, a
traceback where a message naming the value and the fix is owed.
"""

from __future__ import annotations

import json
from typing import Any

from store.errors import ConfigError

__all__ = ["loads"]


def loads(text: str, *, what: str = "", example: str = "") -> Any:
    """``text`` parsed; a ConfigError naming ``what`` (the value), the fault and ``example`` when it is not JSON or
    nests too deep to read."""
    subject, fix = f"{what} is " if what else "", f"; e.g. {example}" if example else ""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{subject}not JSON ({exc.msg} at column {exc.colno}){fix}") from None
    except RecursionError:
        raise ConfigError(
            f"{subject}nested too deep to read (hundreds of levels of lists or objects): flatten it{fix}"
        ) from None
