"""Split record text into chunks small enough to embed.

``Chunker(max_tokens=512, overlap=64).split(text)`` cuts plain text;
``Chunker.markdown(...)`` first cuts Markdown at its ATX headings and starts
every chunk with the heading path ("Pricing > Discounts").

How a text is cut, and the rules the tests hold it to:

* Tokens are estimated at 4 characters a token (``store.calls.tokens.estimate_tokens``,
  the estimate the embedding batcher uses too), so a chunk of ``max_tokens``
  tokens holds at most ``4 * max_tokens`` characters.
* Blank text gives no chunks; a text that fits is exactly one chunk, stripped.
* Otherwise the text is cut at paragraph boundaries (blank lines); a paragraph
  that does not fit is cut at sentence ends (``.``, ``!``, ``?`` or ``…``, an
  optional closing quote or bracket, then whitespace); a sentence that does not
  fit is cut at whitespace; a word that does not fit is cut into pieces of
  exactly ``max_tokens`` tokens. The pieces are packed greedily, in order, into
  chunks of at most ``max_tokens`` tokens.
* A chunk is a stripped slice of the source, ``text[chunk.start:chunk.end]``:
  the whitespace between its pieces is kept as it was.
* Each chunk after the first starts with the longest tail of the previous
  chunk that begins at a word start, is at most ``overlap`` tokens, and still
  leaves room for the next new piece; the tail is never the whole previous
  chunk. When no such tail exists (the last word alone is longer than
  ``overlap``) neighbours do not overlap.

Markdown mode (``Chunker.markdown``):

* The document is cut into sections at its ATX headings, a ``#`` line inside a
  fenced code block being code (``worker.pipeline.markdown`` says which lines).
* A section's chunks start with its heading path and a blank line:
  ``"Pricing > Discounts\\n\\n" + body``. The heading line itself is not
  repeated in the body. Text before the first heading has an empty path and no
  prefix. A section whose body is blank gives no chunk when a section under it
  carries its title in its path; otherwise (a heading alone, a last heading
  with nothing after it) its chunk is its heading path, so a document of
  headings is still searchable. Sections never share a chunk, so a short
  document with two headings gives two chunks.
* The prefix counts against ``max_tokens``: the body of a chunk gets
  ``4 * max_tokens - len(prefix)`` characters, but never less than half of
  ``4 * max_tokens``; only a heading path longer than half a chunk makes a
  chunk exceed ``max_tokens``, by at most the excess of the path.
* A fenced code block is one piece and is never split across chunks, and no
  overlap starts inside one. A block longer than a chunk's body is the one
  exception: it is cut at line breaks, and a line that is still too long like
  a long word, so those chunks hold an unbalanced fence line.

Chunking is deterministic. ``Chunker.describe()`` gives the settings (and
``CHUNKER_VERSION``) for the pipeline's content hash.

Chunks are cut as they are taken (``Chunker.chunks``): sections, pieces and
chunks are each found only when the next one is asked for, so a caller that
stops early holds no more than the chunks it took. ``Chunker.texts(text,
limit=N + 1)`` is how a limit of N chunks a record is checked: a text of
millions of words costs N + 1 chunks, never a piece per word of it.

Besides the standard library, only store's errors, settings (where the
defaults are stated) and token estimate are imported, and the Markdown
structure (``worker.pipeline.markdown``: sections, headings, fenced blocks).
"""

from __future__ import annotations

import collections
import itertools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from store.calls.tokens import CHARS_PER_TOKEN, estimate_tokens
from store.errors import ConfigError
from store.settings import ChunkerSettings, default
from worker.pipeline.markdown import HEADING_SEPARATOR, Section, Span, fenced_blocks, sections

__all__ = [
    "CHARS_PER_TOKEN",
    "CHUNKER_VERSION",
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_OVERLAP",
    "MARKDOWN_VERSION",
    "Chunk",
    "Chunker",
    "estimate_tokens",
]

#: Largest chunk, in estimated tokens, unless configured.
DEFAULT_MAX_TOKENS: int = default(ChunkerSettings, "max_tokens")
#: Tokens that neighbouring chunks share, unless configured.
DEFAULT_OVERLAP: int = default(ChunkerSettings, "overlap")
#: Bumped whenever the same settings would cut a text differently; part of ``describe()``.
CHUNKER_VERSION = 1
#: The same for the Markdown mode, so that a change to it re-chunks Markdown collections only (2: a heading
#: with no body and no section under it is a chunk of its own; it was dropped).
MARKDOWN_VERSION = 2

_Splitter = Callable[[str, int, int], Iterator[Span]]

_PARAGRAPH_BREAK = re.compile(r"\n[^\S\n]*\n\s*")
# A sentence ends at . ! ? or an ellipsis, maybe closed by one quote or bracket, before whitespace.
_SENTENCE_BREAK = re.compile(r"(?:(?<=[.!?\u2026])|(?<=[.!?\u2026][\"'\u201d\u2019)\]]))\s+")
_LINE_BREAK = re.compile(r"\s*\n\s*")
_WHITESPACE = re.compile(r"\s+")
_WORD_START = re.compile(r"(?<!\S)\S")


@dataclass(frozen=True, slots=True)
class Chunk:
    """One piece of a record's text, ready to embed.

    ``text`` is what gets embedded: ``heading`` and a blank line (when there is
    a heading path), then ``body``, the stripped slice ``source[start:end]``.
    """

    index: int
    text: str
    heading: str = ""
    start: int = 0
    end: int = 0

    @property
    def body(self) -> str:
        """The chunk's text without its heading-path prefix."""
        return self.text[len(_prefix(self.heading)) :] if self.heading else self.text


class Chunker:
    """Cuts text into overlapping chunks of at most ``max_tokens`` estimated tokens.

    Raises ``ConfigError`` unless ``max_tokens >= 1`` and ``0 <= overlap < max_tokens``.
    """

    def __init__(
        self, max_tokens: int = DEFAULT_MAX_TOKENS, overlap: int = DEFAULT_OVERLAP, *, markdown: bool = False
    ) -> None:
        _check_settings(max_tokens, overlap)
        self.max_tokens = max_tokens
        self.overlap = overlap
        self.is_markdown = bool(markdown)

    @classmethod
    def markdown(cls, max_tokens: int = DEFAULT_MAX_TOKENS, overlap: int = DEFAULT_OVERLAP) -> Chunker:
        """A chunker that cuts at Markdown headings first and prefixes chunks with their heading path."""
        return cls(max_tokens, overlap, markdown=True)

    @classmethod
    def from_settings(cls, settings: ChunkerSettings) -> Chunker:
        """The chunker a collection's ``[collections.<name>.chunker]`` settings describe."""
        return cls(settings.max_tokens, settings.overlap, markdown=settings.markdown)

    def describe(self) -> dict[str, int | bool]:
        """The settings that decide how a text is cut, for content hashes; JSON-plain."""
        return {
            "max_tokens": self.max_tokens,
            "overlap": self.overlap,
            "markdown": self.is_markdown,
            "version": MARKDOWN_VERSION if self.is_markdown else CHUNKER_VERSION,
        }

    def chunks(self, text: str) -> Iterator[Chunk]:
        """The chunks of ``text``, in order, each cut when it is asked for; blank text gives none."""
        parts = sections(text) if self.is_markdown else iter([("", 0, len(text))])
        index = 0
        for (heading, start, end), below in _with_next_heading(parts):
            blocks = fenced_blocks(text, start, end) if self.is_markdown else iter(())
            fences = _Fences(_strip(text, s, e) for s, e in blocks)
            alone = bool(heading)
            for s, e in self._section_spans(text, start, end, _prefix(heading), fences):
                yield Chunk(index, _prefix(heading) + text[s:e], heading, s, e)
                index, alone = index + 1, False
            if alone and not below.startswith(heading + HEADING_SEPARATOR):
                yield Chunk(index, heading, heading, start, start)  # a heading alone
                index += 1

    def split(self, text: str) -> list[Chunk]:
        """Cut ``text`` into chunks, in order; blank text gives an empty list."""
        return list(self.chunks(text))

    def texts(self, text: str, *, limit: int) -> list[str]:
        """The texts of ``text``'s first ``limit`` chunks, the rest never cut: a caller that allows N chunks asks
        for N + 1, so a text over the limit costs N + 1 chunks, not all of its own (``max_chunks_per_record``)."""
        return [chunk.text for chunk in itertools.islice(self.chunks(text), limit)]

    def __repr__(self) -> str:
        kind = "Chunker.markdown" if self.is_markdown else "Chunker"
        return f"{kind}(max_tokens={self.max_tokens}, overlap={self.overlap})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Chunker) and self.describe() == other.describe()

    def __hash__(self) -> int:
        return hash(tuple(self.describe().items()))

    def _section_spans(self, text: str, start: int, end: int, prefix: str, fences: _Fences) -> Iterator[Span]:
        start, end = _strip(text, start, end)
        if start == end:
            return
        limit = self.max_tokens * CHARS_PER_TOKEN
        budget = max(limit - len(prefix), limit // 2)
        pieces = _section_pieces(text, start, end, budget, fences)
        yield from _pack(text, pieces, budget, self.overlap * CHARS_PER_TOKEN, fences)


def _check_settings(max_tokens: object, overlap: object) -> None:
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise ConfigError(f"chunker max_tokens is {max_tokens!r}; it must be a whole number >= 1 (chunker.max_tokens)")
    if not isinstance(overlap, int) or isinstance(overlap, bool) or not 0 <= overlap < max_tokens:
        raise ConfigError(
            f"chunker overlap is {overlap!r}; it must be a whole number from 0 to {max_tokens - 1}, "
            f"below max_tokens={max_tokens} (chunker.overlap)"
        )


def _prefix(heading: str) -> str:
    return f"{heading}\n\n" if heading else ""


def _strip(text: str, start: int, end: int) -> Span:
    """``text[start:end]`` without the whitespace at either end, as a span."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _with_next_heading(sections: Iterator[Section]) -> Iterator[tuple[Section, str]]:
    """Each section with the heading path of the one after it ("" for the last)."""
    current = next(sections, None)
    while current is not None:
        following = next(sections, None)
        yield current, following[0] if following is not None else ""
        current = following


# --- cutting a section into pieces that each fit -------------------------------------------------


def _splitter(pattern: re.Pattern[str]) -> _Splitter:
    def split(text: str, start: int, end: int) -> Iterator[Span]:
        pos = start
        for match in pattern.finditer(text, start, end):
            yield from _nonblank(text, pos, match.start())
            pos = match.end()
        yield from _nonblank(text, pos, end)

    return split


def _nonblank(text: str, start: int, end: int) -> Iterator[Span]:
    start, end = _strip(text, start, end)
    if start < end:
        yield start, end


_BY_WHITESPACE = _splitter(_WHITESPACE)
_PROSE_LEVELS = (_splitter(_PARAGRAPH_BREAK), _splitter(_SENTENCE_BREAK), _BY_WHITESPACE)
_CODE_LEVELS = (_splitter(_LINE_BREAK), _BY_WHITESPACE)
_WORD = re.compile(r"\S+")


def _words(text: str, start: int, end: int, budget: int) -> Iterator[Span]:
    """What ``_fit`` makes of ``text[start:end]`` at the last level, without a call per word: each word, and a
    word longer than ``budget`` cut into pieces of ``budget`` characters (the hot loop of plain prose)."""
    for match in _WORD.finditer(text, start, end):
        s, e = match.span()
        if e - s <= budget:
            yield s, e
        else:
            yield from ((cut, min(cut + budget, e)) for cut in range(s, e, budget))


def _section_pieces(text: str, start: int, end: int, budget: int, fences: _Fences) -> Iterator[Span]:
    if end - start <= budget:
        yield start, end
        return
    pos = start
    for fence_start, fence_end in fences:  # a section's fences all start inside its stripped body
        yield from _fit(text, pos, fence_start, budget, _PROSE_LEVELS)
        yield from _fit(text, fence_start, fence_end, budget, _CODE_LEVELS)
        pos = fence_end
    yield from _fit(text, pos, end, budget, _PROSE_LEVELS)


def _fit(text: str, start: int, end: int, budget: int, levels: tuple[_Splitter, ...]) -> Iterator[Span]:
    """Stripped pieces of ``text[start:end]`` of at most ``budget`` characters, cut as coarsely as can be."""
    start, end = _strip(text, start, end)
    if end - start <= budget:
        if start < end:
            yield start, end
    elif not levels:
        yield from ((s, min(s + budget, end)) for s in range(start, end, budget))
    elif levels == (_BY_WHITESPACE,):
        yield from _words(text, start, end, budget)
    else:
        for s, e in levels[0](text, start, end):
            yield from _fit(text, s, e, budget, levels[1:])


class _Fences:
    """A section's fenced code blocks, taken as its pieces reach them; keeps only those an overlap may still start
    in, so a section of many blocks holds a chunk's worth of them."""

    def __init__(self, spans: Iterator[Span]) -> None:
        self._spans = spans
        self._seen: collections.deque[Span] = collections.deque()

    def __iter__(self) -> Iterator[Span]:
        for span in self._spans:
            self._seen.append(span)
            yield span

    def forget(self, before: int) -> None:
        """Drop the blocks that end at or before ``before``: no later question is about them."""
        while self._seen and self._seen[0][1] <= before:
            self._seen.popleft()

    def inside(self, pos: int) -> bool:
        """Whether ``pos`` is strictly inside a block; asked at positions that never go back."""
        self.forget(pos)
        return bool(self._seen) and self._seen[0][0] < pos


# --- packing pieces into overlapping chunks ------------------------------------------------------


def _pack(text: str, pieces: Iterator[Span], budget: int, overlap: int, fences: _Fences) -> Iterator[Span]:
    """Pieces packed greedily, in order, into spans of at most ``budget`` characters, each after the first
    starting with an overlap of the one before; a span is given as soon as the next piece does not fit it."""
    piece, previous = next(pieces, None), None
    while piece is not None:
        start, end = piece
        if previous is not None:
            start = _overlap_start(text, previous, piece, budget, overlap, fences)
        piece = next(pieces, None)
        while piece is not None and piece[1] - start <= budget:
            end = piece[1]
            piece = next(pieces, None)
        previous = (start, end)
        fences.forget(start)
        yield previous


def _overlap_start(text: str, previous: Span, piece: Span, budget: int, overlap: int, fences: _Fences) -> int:
    """Where the chunk that begins with ``piece`` starts: the earliest allowed word start in ``previous``."""
    prev_start, prev_end = previous
    earliest = max(prev_start + 1, prev_end - overlap, piece[1] - budget)
    for match in _WORD_START.finditer(text, earliest, prev_end):
        if not fences.inside(match.start()):
            return match.start()
    return piece[0]
