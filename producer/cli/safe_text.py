"""What the CLI prints from data, made safe for a terminal: the one place that decides how.

Ids, texts, metadata, names and error texts come from users, sources, models and the state database. A
control character in them reaches the operator's terminal as a command (an OSC 8 link, a screen clear, a
window title, an 8-bit CSI), and a bidi control reorders what follows it on the line. ``printable`` shows each
such character escaped as Python writes it (``\\x1b``, ``\\x9b``, ``\\u202e``, ``\\n``): C0 controls, DEL, C1
controls, the bidi controls (U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069), the line and paragraph
separators (U+2028, U+2029) and lone surrogates, which cannot even be encoded. Everything else (accents, CJK,
emoji, a backslash) is left as it is; ``--json`` is where a value is given byte for byte.

Newlines and tabs are escaped too, by default: a value is printed in a table cell or inside a line of ours,
where a newline would start a false line or row. Prose of several lines (an answer) keeps them (``lines``).

Rich markup needs no escaping here: the CLI's consoles never read markup (``producer.cli.console``), and a
``Text`` is literal, so ``rich.markup.escape`` would only add backslashes to what is printed. ``EscapeControls``
is the consoles' last guard: whatever reaches them unescaped is escaped as it is written.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from rich.console import ConsoleRenderable, RenderHook
from rich.segment import Segment
from rich.text import Text

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderableType

__all__ = ["EscapeControls", "cell", "printable"]

#: DEL, C1 controls, bidi controls, line and paragraph separators, lone surrogates: escaped everywhere.
_BEYOND_C0 = "\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff"
#: Every character ``printable`` escapes, and the same but newline and tab (``lines``).
_UNSAFE = re.compile(f"[\x00-\x1f{_BEYOND_C0}]")
_UNSAFE_IN_LINES = re.compile(f"[\x00-\x08\x0b-\x1f{_BEYOND_C0}]")
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return _SHORT.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def printable(text: str, *, lines: bool = False) -> str:
    """``text`` with every control, bidi control and lone surrogate shown escaped, so printing it moves no
    cursor and reorders nothing; with ``lines``, newlines and tabs are kept. Escaping twice changes nothing."""
    return (_UNSAFE_IN_LINES if lines else _UNSAFE).sub(_escaped, text)


def cell(text: str, *, style: str = "") -> Text:
    """A table cell holding ``text`` literally (never markup) and escaped."""
    return Text(printable(text), style=style)


class EscapeControls(RenderHook):
    """A console's last guard: escapes the control characters in whatever it prints, its own codes (styles,
    cursor moves) left alone, which it writes after this hook has run."""

    def process_renderables(self, renderables: list[ConsoleRenderable]) -> list[ConsoleRenderable]:
        return [_Escaped(renderable) for renderable in renderables]


class _Escaped:
    """``renderable`` as rendered, each text segment escaped (``printable`` keeping line ends)."""

    def __init__(self, renderable: RenderableType) -> None:
        self.renderable = renderable

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Segment]:
        for segment in console.render(self.renderable, options):
            yield segment if segment.control else Segment(printable(segment.text, lines=True), segment.style)
