"""The structure of a Markdown text, as the chunker's Markdown mode cuts it (``worker.pipeline.chunker``): its
sections at ATX headings, each with its heading path ("Pricing > Discounts"), and its fenced code blocks, each
found only when the next one is asked for. Spans are (start, end) offsets into the text.

An ATX heading is ``#`` to ``######`` after up to three spaces of indentation. A ``#`` line inside a fenced code
block (three or more backticks or tildes) is code, not a heading; a fence left open runs to the end of the text.
Setext headings are not recognised. Only the standard library is imported.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

__all__ = ["HEADING_SEPARATOR", "Section", "Span", "fenced_blocks", "sections"]

#: Joins the titles of a heading path: "Pricing > Discounts".
HEADING_SEPARATOR = " > "

#: Where a piece of the text starts and ends.
Span = tuple[int, int]
#: A Markdown section: its heading path, and where its body starts and ends.
Section = tuple[str, int, int]

_LINE = re.compile(r"[^\n]*\n?")
_HEADING = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t\r]*\n?")
_CLOSING_HASHES = re.compile(r"(?:^|[ \t]+)#+$")
_FENCE_OPEN = re.compile(r" {0,3}(`{3,}(?=[^`]*$)|~{3,})")


def sections(text: str) -> Iterator[Section]:
    """The sections of ``text``, in order, each found when asked for: the text before the first heading, then
    each ATX heading's path with its body (up to the next heading outside a fenced block)."""
    titles: list[tuple[int, str]] = []
    heading, body_start = "", 0
    for (line_start, line_end), match in _blocks(text, 0, len(text)):
        if match is not None:
            yield heading, body_start, line_start
            heading = _heading_path(titles, len(match.group(1)), match.group(2) or "")
            body_start = line_end
    yield heading, body_start, len(text)


def fenced_blocks(text: str, start: int, end: int) -> Iterator[Span]:
    """The fenced code blocks of one section's body, ``text[start:end]``, in order, each from the start of its
    opening fence line to the end of its closing one (one left open runs to the end of the text, which is its
    section's end: a heading inside it is code)."""
    return (span for span, match in _blocks(text, start, end) if match is None)


def _blocks(text: str, start: int, end: int) -> Iterator[tuple[Span, re.Match[str] | None]]:
    """The fenced code blocks (their lines' span, None) and the ATX heading lines (line span, match) of the whole lines
    of ``text[start:end]``, in order; a ``#`` line inside a block is code."""
    fence: tuple[str, int] | None = None  # the open fence's marker and where it starts
    for line in _LINE.finditer(text, start, end):
        if line.start() == end:
            break
        if fence is not None:
            if _closes(line, fence[0]):
                yield (fence[1], line.end()), None
                fence = None
            continue
        opening = _FENCE_OPEN.match(text, line.start(), line.end())
        if opening:
            fence = (opening.group(1), line.start())
            continue
        match = _HEADING.fullmatch(text, line.start(), line.end())
        if match:
            yield (line.start(), line.end()), match
    if fence is not None:
        yield (fence[1], end), None


def _closes(line: re.Match[str], marker: str) -> bool:
    content = line.group().rstrip()
    stripped = content.lstrip(" ")
    return len(content) - len(stripped) <= 3 and len(stripped) >= len(marker) and stripped == marker[0] * len(stripped)


def _heading_path(titles: list[tuple[int, str]], level: int, title: str) -> str:
    while titles and titles[-1][0] >= level:
        titles.pop()
    titles.append((level, _CLOSING_HASHES.sub("", title.strip()).strip()))
    return HEADING_SEPARATOR.join(t for _, t in titles if t)
