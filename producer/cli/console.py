"""Where the CLI writes, and how an error becomes one clear line and an exit code instead of a traceback.

Commands open what they work on (the producer, or the settings with the collections) here, so a bad
settings file or an unreachable part is reported the same way by each.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import typer
from rich.console import Console
from rich.text import Text

from producer.cli.discovery import NOT_LOOKED, found
from producer.cli.safe_text import EscapeControls, printable
from store.errors import VectorsyncError

if TYPE_CHECKING:
    from store.lifecycle import Collections
    from store.settings import Settings

__all__ = [
    "confirmed",
    "err",
    "error",
    "errors",
    "guarded",
    "open_collections",
    "open_producer",
    "out",
    "say",
    "short",
    "styled",
    "where",
]

# Soft wrap: messages stay whole lines on a pipe; tables still fit the width. No markup: ids, names, filters and
# errors come from users, sources and the state database, and "[/b]" or "[link=...]" in them is text. Their control
# characters are escaped where they are printed (safe_text.printable), and by each console as it writes, at last.
T = TypeVar("T")


def _console(*, stderr: bool = False) -> Console:
    """A console that wraps softly, reads no markup and escapes the control characters it is given."""
    console = Console(stderr=stderr, soft_wrap=True, markup=False)
    console.push_render_hook(EscapeControls())
    return console


out = _console()
err = _console(stderr=True)


@contextmanager
def errors() -> Iterator[None]:
    """One clear line and exit code 2 instead of a traceback."""
    try:
        yield
    except VectorsyncError as exc:
        error(_unread() + str(exc))
        raise typer.Exit(2) from None
    except Exception as exc:
        from kombu.exceptions import OperationalError

        if isinstance(exc, OperationalError):
            error(f"the broker cannot be reached: {exc} (broker.url)")
            raise typer.Exit(2) from None
        raise


def _unread() -> str:
    """What an error starts with when the command read no settings file: where it looked and the fix, first,
    since the setting it then names is missing only because every value was a default."""
    where = found()
    if where.path is not None or where == NOT_LOOKED:
        return ""
    return (
        f"no settings file read: {where.how}; run it from the folder of yours (or of the checkout where "
        "`vectorsync dev` runs), or name it: VECTORSYNC_CONFIG=path/to/vectorsync.toml. With every setting at "
        "its default: "
    )


def guarded(action: Callable[[], T]) -> T:
    """``action()``, its errors reported as ``errors`` does."""
    with errors():
        return action()


def open_producer() -> Any:
    """The default producer (settings from ``--config`` or ``VECTORSYNC_CONFIG``), its errors as one line."""
    from store.process.defaults import default_producer

    with errors():
        return default_producer()


def open_collections(settings: Settings | None = None) -> tuple[Settings, Collections]:
    """The settings (default: loaded now) and the collections they name, for the commands that manage
    collections."""
    from store.lifecycle import Collections
    from store.settings import load_settings

    settings = settings or guarded(load_settings)
    return settings, guarded(lambda: Collections.from_settings(settings))


def confirmed(question: str, *, action: str, yes: bool, flag: str = "--yes") -> None:
    """Go on when ``flag`` was given or the user answers yes to ``question`` on a terminal. Without ``flag`` a
    pipe cannot answer, so ``action`` is refused (exit 2) rather than taken as consented; declining exits 1."""
    if yes:
        return
    if not sys.stdin.isatty():
        error(f"{action} needs confirmation and stdin is not a terminal: pass {flag}")
        raise typer.Exit(2)
    if not typer.confirm(question, default=False):
        err.print("aborted: nothing changed", highlight=False)
        raise typer.Exit(1)


def error(message: str) -> None:
    """``error: message`` on stderr, the message literally, its control characters escaped (its lines kept)."""
    err.print(styled(("error:", "red"), f" {printable(message, lines=True)}"), highlight=False)


def styled(*parts: str | tuple[str, str]) -> Text:
    """A line of plain parts and ``(text, style)`` parts, each printed literally."""
    return Text.assemble(*parts)


def say(text: str, *, style: str = "") -> None:
    """Print ``text`` literally (never as markup): wrapped to a terminal's width, whole on a pipe."""
    out.print(Text(text, style=style), soft_wrap=not out.is_terminal)


def short(text: str, width: int) -> str:
    """``text`` on one line, cut to ``width`` characters with an ellipsis, then escaped (``printable``): an
    escape is never cut in two, and makes the text a few characters wider than ``width``."""
    text = " ".join(text.split())
    return printable(text if len(text) <= width else text[: width - 1] + "…")


def where(collection: str, generation: str, place: str) -> str:
    """Where searches of ``collection`` read, for ``explain`` and ``verify``: ``in the pgvector table vs_notes``,
    with the generation when a migration made one."""
    migrated = f", generation {printable(generation)}" if generation != collection else ""
    return f"in {printable(place)}{migrated}"
