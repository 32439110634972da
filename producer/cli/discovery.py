"""Which settings file a ``vectorsync`` command reads, and saying so: ``--config`` or ``VECTORSYNC_CONFIG``, else
``./vectorsync.toml``, else the ``.vectorsync-dev/vectorsync.toml`` that ``vectorsync dev`` made in this folder or
one above it (a checkout's). A command that reads none and then fails on a setting says where it looked, so a
person run from another folder is not left guessing why ``status`` wants a state database.

Only the CLI looks above its folder: ``load_settings()`` in app code reads what it is told, never a dev file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DEV_CONFIG", "DEV_MADE", "LOCAL_CONFIG", "LOOKED", "NOT_LOOKED", "Found", "clear", "discover", "found"]

#: What ``vectorsync dev`` writes in its working folder (``producer.cli.dev.harness.DEFAULT_DIR``).
DEV_CONFIG = Path(".vectorsync-dev") / "vectorsync.toml"
#: The file a command reads from its own folder (``store.settings.DEFAULT_CONFIG_PATH``; not imported, so that
#: ``--help`` stays light).
LOCAL_CONFIG = Path("vectorsync.toml")
#: Where a command looks, as its messages say it.
LOOKED = f"--config, VECTORSYNC_CONFIG, ./{LOCAL_CONFIG}, and {DEV_CONFIG} here and in the folders above"


@dataclass(frozen=True, slots=True)
class Found:
    """The settings file a command reads (None: none, every value a default) and how it was found."""

    path: Path | None
    how: str


#: How a file ``vectorsync dev`` made is said to be found.
DEV_MADE = "made by `vectorsync dev`"

NOT_LOOKED = Found(None, "not looked for yet")
_found = NOT_LOOKED


def discover(cwd: Path | None = None) -> Found:
    """Find the settings file, set ``VECTORSYNC_CONFIG`` to a dev file found above, and remember what was found."""
    global _found
    named = os.environ.get("VECTORSYNC_CONFIG")
    here = Path.cwd() if cwd is None else cwd
    if named:
        _found = Found(Path(named), "named by --config or VECTORSYNC_CONFIG")
    elif (here / LOCAL_CONFIG).is_file():
        _found = Found(here / LOCAL_CONFIG, "in this folder")
    else:
        dev = next((folder / DEV_CONFIG for folder in (here, *here.parents) if (folder / DEV_CONFIG).is_file()), None)
        _found = Found(dev, DEV_MADE) if dev is not None else Found(None, f"looked for {LOOKED}")
        if dev is not None:
            os.environ["VECTORSYNC_CONFIG"] = str(dev)
    return _found


def found() -> Found:
    """What ``discover`` found for this command."""
    return _found


def clear() -> None:
    """Forget what was found, once the command that looked has ended (a process may run several: tests do)."""
    global _found
    _found = NOT_LOOKED
