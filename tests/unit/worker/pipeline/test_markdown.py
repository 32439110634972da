"""The structure of a Markdown text (``worker.pipeline.markdown``) and the Markdown chunker's properties: heading
paths, budgets and code fences, over generated documents."""

from __future__ import annotations

import functools
import itertools
import re
from dataclasses import dataclass, field

from hypothesis import given
from hypothesis import strategies as st

from tests.unit.worker.pipeline.test_chunker import PROPERTY, chunkers, prose
from worker.pipeline.chunker import Chunk, Chunker, estimate_tokens
from worker.pipeline.markdown import HEADING_SEPARATOR, fenced_blocks, sections

# --- properties: Markdown ------------------------------------------------------------------------

FENCE_LINES = [
    "# not a heading",
    "## also code",
    "x = 1",
    "",
    "    y = 2",
    "print('hi')  # comment",
    "z" * 40,
]


@dataclass
class Doc:
    """A generated Markdown document and what a correct parse of it knows."""

    text: str = ""
    #: (heading path, body start, body end) for every section, the one before the first heading included.
    sections: list[tuple[str, int, int]] = field(default_factory=lambda: [("", 0, 0)])
    fences: list[tuple[int, int]] = field(default_factory=list)
    titles: list[tuple[int, str]] = field(default_factory=list)

    def add(self, block: str) -> tuple[int, int]:
        start = len(self.text)
        self.text += block
        return start, len(self.text)

    def heading(self, level: int, title: str, line: str) -> None:
        self.close_section()
        self.add(line)
        while self.titles and self.titles[-1][0] >= level:
            self.titles.pop()
        self.titles.append((level, title))
        path = " > ".join(t for _, t in self.titles)
        self.sections.append((path, len(self.text), len(self.text)))

    def close_section(self) -> None:
        path, start, _ = self.sections[-1]
        self.sections[-1] = (path, start, len(self.text))


def _add_heading(level: int, title: str, indent: str, closing: str, doc: Doc) -> None:
    doc.heading(level, title, f"{indent}{'#' * level} {title}{closing}\n")


def _add_prose(text: str, doc: Doc) -> None:
    # Prose is letters and punctuation: no line of it is a heading or a fence.
    doc.add(text.replace("\r", "") + "\n")


def _add_fence(opener: str, lines: list[str], doc: Doc) -> None:
    closer = opener.removesuffix("py")
    doc.fences.append(doc.add(opener + "\n" + "".join(line + "\n" for line in lines) + closer))
    doc.add("\n")


title = st.lists(st.text(alphabet="abcdefghij", min_size=1, max_size=6), min_size=1, max_size=3).map(" ".join)
block = st.one_of(
    st.builds(
        functools.partial,
        st.just(_add_heading),
        st.integers(1, 6),
        title,
        st.sampled_from(["", " ", "  "]),
        st.sampled_from(["", " #", " ###"]),
    ),
    st.builds(functools.partial, st.just(_add_prose), prose),
    st.builds(
        functools.partial,
        st.just(_add_fence),
        st.sampled_from(["```", "~~~", "````", "```py"]),
        st.lists(st.sampled_from(FENCE_LINES), max_size=6),
    ),
)


@st.composite
def documents(draw: st.DrawFn) -> Doc:
    doc = Doc()
    for add_block in draw(st.lists(block, max_size=12)):
        add_block(doc)
        doc.add(draw(st.sampled_from(["", "\n"])))
    doc.close_section()
    return doc


@PROPERTY
@given(documents())
def test_the_structure_found_is_the_sections_and_fences_the_document_was_made_of(doc: Doc) -> None:
    """Each section's heading path and body, each fenced block whole (its ``#`` lines code, not headings)."""
    found = list(sections(doc.text))
    assert found == doc.sections
    assert all("not a heading" not in path and "also code" not in path for path, _, _ in found)
    blocks = [doc.text[s:e] for _, start, end in found for s, e in fenced_blocks(doc.text, start, end)]
    assert [block.strip() for block in blocks] == [doc.text[s:e] for s, e in doc.fences]
    assert all(block.endswith("\n") or doc.text.endswith(block) for block in blocks)  # whole lines


def _budget(chunker: Chunker, heading: str) -> int:
    prefix = len(heading) + 2 if heading else 0
    return max(chunker.max_tokens * 4 - prefix, chunker.max_tokens * 2)


def _section_of(doc: Doc, chunk: Chunk) -> tuple[str, int, int]:
    [section] = [s for s in doc.sections if s[1] <= chunk.start and chunk.end <= s[2]]
    return section


@PROPERTY
@given(chunkers(markdown=True), documents())
def test_markdown_chunks_carry_their_section_heading_path_and_cover_each_section(chunker: Chunker, doc: Doc) -> None:
    chunks = chunker.split(doc.text)
    assert [c.index for c in chunks] == list(range(len(chunks)))
    for chunk in chunks:
        path, _, _ = _section_of(doc, chunk)
        assert chunk.heading == path
        body = doc.text[chunk.start : chunk.end]
        if not body:  # a heading alone (a section with no body and no section under it): its path
            assert chunk.text == path != "" and chunk.body == ""
            continue
        assert chunk.text == (f"{path}\n\n{body}" if path else body)
        assert chunk.body == body == body.strip() != ""
        assert "not a heading" not in chunk.heading and "also code" not in chunk.heading
    for number, (path, start, end) in enumerate(doc.sections):
        own = [c for c in chunks if start <= c.start and c.end <= end]
        text = doc.text[start:end]
        if not text.strip():
            below = doc.sections[number + 1][0] if number + 1 < len(doc.sections) else ""
            alone = bool(path) and not below.startswith(path + HEADING_SEPARATOR)
            assert [c.text for c in own] == ([path] if alone else [])
            continue
        assert own[0].start == start + len(text) - len(text.lstrip())
        assert own[-1].end == start + len(text.rstrip())
        for previous, chunk in itertools.pairwise(own):
            assert previous.start < chunk.start and previous.end < chunk.end
            assert doc.text[previous.end : chunk.start].strip() == ""
            assert estimate_tokens(doc.text[chunk.start : previous.end]) <= chunker.overlap


@PROPERTY
@given(chunkers(markdown=True), documents())
def test_markdown_chunks_fit_once_the_heading_path_is_budgeted(chunker: Chunker, doc: Doc) -> None:
    for chunk in chunker.split(doc.text):
        prefix = len(chunk.text) - len(chunk.body)
        assert len(chunk.body) <= _budget(chunker, chunk.heading)
        # Over max_tokens only when the heading path takes more than half a chunk.
        assert len(chunk.text) <= max(chunker.max_tokens * 4, prefix + chunker.max_tokens * 2)


@PROPERTY
@given(chunkers(markdown=True), documents())
def test_markdown_code_fences_that_fit_are_never_split_or_entered(chunker: Chunker, doc: Doc) -> None:
    chunks = chunker.split(doc.text)
    fits = all(
        end - start <= _budget(chunker, _section_of(doc, Chunk(0, "", "", start, end))[0]) for start, end in doc.fences
    )
    for chunk in chunks:
        for start, end in doc.fences:
            if end - start <= _budget(chunker, chunk.heading):
                inside = chunk.start <= start and end <= chunk.end
                apart = chunk.end <= start or end <= chunk.start
                assert inside or apart
        if fits:
            fence_lines = [line for line in chunk.body.split("\n") if re.match(r"(`{3,}|~{3,})", line)]
            assert len(fence_lines) % 2 == 0, "no chunk ends inside an open fence"
