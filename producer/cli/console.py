"""Where the CLI writes, and how an error becomes one clear line and an exit code instead of a traceback."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import typer
from rich.console import Console
from rich.text import Text

from store.errors import VectorsyncError

__all__ = ["err", "errors", "guarded", "out", "say", "short"]

out = Console(soft_wrap=True)  # messages stay whole lines on a pipe; tables still fit the width
err = Console(stderr=True, soft_wrap=True)
T = TypeVar("T")


@contextmanager
def errors() -> Iterator[None]:
    """One clear line and exit code 2 instead of a traceback."""
    try:
        yield
    except VectorsyncError as exc:
        err.print(f"[red]error:[/red] {exc}", highlight=False)
        raise typer.Exit(2) from None
    except Exception as exc:
        from kombu.exceptions import OperationalError

        if isinstance(exc, OperationalError):
            err.print(f"[red]error:[/red] the broker cannot be reached: {exc} (broker.url)", highlight=False)
            raise typer.Exit(2) from None
        raise


def guarded(action: Callable[[], T]) -> T:
    """``action()``, its errors reported as ``errors`` does."""
    with errors():
        return action()


def say(text: str, *, style: str = "") -> None:
    """Print ``text`` literally (never as markup): wrapped to a terminal's width, whole on a pipe."""
    out.print(Text(text, style=style), soft_wrap=not out.is_terminal)


def short(text: str, width: int) -> str:
    """``text`` on one line, cut to ``width`` characters with an ellipsis."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"
