"""What the CLI prints from data is made safe for a terminal in one place (``producer.cli.safe_text``): control
characters, DEL, C1 codes, bidi controls and lone surrogates are shown escaped; the rest is left as it is."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from rich.table import Table
from rich.text import Text

from producer.cli.safe_text import EscapeControls, cell, printable

LINK = "\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\"


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        (LINK, "\\x1b]8;;http://evil\\x1b\\link\\x1b]8;;\\x1b\\"),
        ("\x1b[2J", r"\x1b[2J"),
        ("\x1b]0;title\x07", r"\x1b]0;title\x07"),
        ("a\x00b\x08c\x7fd", r"a\x00b\x08c\x7fd"),
        ("\x9b2J\x85", r"\x9b2J\x85"),  # C1: an 8-bit CSI, NEL
        ("abc\u202edef\u2066g\u2069\u200f\u061c", r"abc\u202edef\u2066g\u2069\u200f\u061c"),
        ("one\ntwo\tthree\rfour", r"one\ntwo\tthree\rfour"),
        ("line\u2028para\u2029", r"line\u2028para\u2029"),
        ("bad \udc9f byte", r"bad \udc9f byte"),  # a lone surrogate (surrogateescape) cannot even be encoded
    ],
)
def test_control_characters_are_shown_escaped(raw: str, shown: str) -> None:
    assert printable(raw) == shown


def test_ordinary_text_is_left_as_it_is() -> None:
    text = "café naïve 東京 🙂 👩‍💻 [b]x[/b] C:\\path «»"
    assert printable(text) == text


def test_lines_keeps_newlines_and_tabs_and_escapes_the_rest() -> None:
    assert printable("a\nb\tc\x1b[2J\r", lines=True) == "a\nb\tc\\x1b[2J\\r"


def test_escaping_twice_changes_nothing() -> None:
    once = printable(f"{LINK}\n\u202e")
    assert printable(once) == once


def test_a_cell_is_literal_text_escaped() -> None:
    shown = cell("[b]id[/b]\x1b[2J")
    assert isinstance(shown, Text) and shown.plain == "[b]id[/b]\\x1b[2J"


def _printed(*renderables: object) -> str:
    file = io.StringIO()
    console = Console(file=file, width=200, markup=False, color_system="truecolor", force_terminal=True)
    console.push_render_hook(EscapeControls())
    console.print(*renderables, highlight=False)
    return file.getvalue()


def test_the_console_guard_escapes_what_reached_it_raw_and_keeps_its_own_styles() -> None:
    table = Table("id")
    table.add_row(Text("x\x1b[2Jy", style="red"))
    printed = _printed(table, "line\x1b]0;t\x07 one\nline two")
    assert "x\\x1b[2Jy" in printed and "line\\x1b]0;t one\nline two" in printed  # rich drops a BEL itself
    assert "\x1b[31m" in printed or "\x1b[1;31m" in printed or "\x1b[38;5;1m" in printed  # red, rich's own code
    assert "\x1b[2J" not in printed and "\x1b]0;" not in printed and "\x07" not in printed
