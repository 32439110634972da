"""The chunker: exact examples, then the properties every split must keep."""

from __future__ import annotations

import ast
import itertools
import re
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import worker.pipeline.chunker as chunking
import worker.pipeline.markdown as markdown_structure
from store.errors import ConfigError
from store.settings import ChunkerSettings
from worker.pipeline.chunker import CHUNKER_VERSION, MARKDOWN_VERSION, Chunk, Chunker, estimate_tokens

PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --- examples ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "tokens"), [("", 0), ("a", 1), ("abcd", 1), ("abcde", 2), ("x" * 2048, 512)])
def test_estimate_tokens_is_four_characters_a_token_rounded_up(text: str, tokens: int) -> None:
    assert estimate_tokens(text) == tokens


@pytest.mark.parametrize("text", ["", "   ", "\n\n\t \r\n", "\u00a0\u2003"])
def test_blank_text_gives_no_chunks(text: str) -> None:
    assert Chunker().split(text) == []
    assert Chunker.markdown().split(text) == []


def test_text_that_fits_is_one_stripped_chunk() -> None:
    assert Chunker(max_tokens=3, overlap=1).split("  hello world \n") == [Chunk(0, "hello world", "", 2, 13)]


def test_paragraphs_then_sentences_are_packed_with_an_overlap_at_a_word_start() -> None:
    text = "Alpha beta gamma. Delta epsilon zeta eta.\n\nTheta iota kappa lambda mu nu xi omicron pi."
    assert Chunker(max_tokens=8, overlap=2).split(text) == [
        Chunk(0, "Alpha beta gamma.", "", 0, 17),
        Chunk(1, "gamma. Delta epsilon zeta eta.", "", 11, 41),
        Chunk(2, "eta.\n\nTheta iota kappa lambda mu", "", 37, 69),
        Chunk(3, "mu nu xi omicron pi.", "", 67, 87),
    ]


def test_whole_paragraphs_stay_together_when_they_fit() -> None:
    text = "One two three.\n\nFour five six.\n\nSeven eight nine."
    assert [c.text for c in Chunker(max_tokens=8, overlap=0).split(text)] == [
        "One two three.\n\nFour five six.",
        "Seven eight nine.",
    ]


def test_a_word_longer_than_a_chunk_is_cut_into_pieces_of_max_tokens() -> None:
    assert Chunker(max_tokens=2, overlap=1).split("abcdefghijklmnopqrst uvw") == [
        Chunk(0, "abcdefgh", "", 0, 8),
        Chunk(1, "ijklmnop", "", 8, 16),
        Chunk(2, "qrst uvw", "", 16, 24),
    ]


MARKDOWN = """intro text
# Pricing
base
## Discounts
ten percent off.
```
# not heading
code
```
# Other #
more"""


def test_markdown_chunks_start_with_their_heading_path() -> None:
    assert Chunker.markdown(max_tokens=16, overlap=4).split(MARKDOWN) == [
        Chunk(0, "intro text", "", 0, 10),
        Chunk(1, "Pricing\n\nbase", "Pricing", 21, 25),
        Chunk(
            2,
            "Pricing > Discounts\n\nten percent off.\n```\n# not heading\ncode\n```",
            "Pricing > Discounts",
            39,
            82,
        ),
        Chunk(3, "Other\n\nmore", "Other", 93, 97),
    ]


def test_markdown_heading_path_counts_against_max_tokens() -> None:
    text = "# Title\n\nAlpha beta gamma delta epsilon"
    chunks = Chunker.markdown(max_tokens=6, overlap=0).split(text)
    # 24 characters a chunk; "Title\n\n" takes 7, leaving 17 for the body.
    assert [c.text for c in chunks] == ["Title\n\nAlpha beta gamma", "Title\n\ndelta epsilon"]
    assert all(estimate_tokens(c.text) <= 6 for c in chunks)


def test_markdown_fence_is_kept_whole_and_overlap_never_starts_inside_it() -> None:
    text = "# Code\n\nSee below.\n\n```py\nx = 1\ny = 2\n```\n\nAfter the fence."
    chunks = Chunker.markdown(max_tokens=10, overlap=5).split(text)
    assert [c.body for c in chunks] == ["See below.\n\n```py\nx = 1\ny = 2\n```", "After the fence."]


def test_markdown_fence_longer_than_a_chunk_is_cut_at_line_breaks() -> None:
    text = "```\nline one\nline two\nline three\n```"
    assert [c.text for c in Chunker.markdown(max_tokens=4, overlap=0).split(text)] == [
        "```\nline one",
        "line two",
        "line three\n```",
    ]


def test_markdown_unclosed_fence_runs_to_the_end_and_hides_headings() -> None:
    text = "# A\n~~~\n# B\ntext"
    assert Chunker.markdown().split(text) == [Chunk(0, "A\n\n~~~\n# B\ntext", "A", 4, 16)]


def test_markdown_heading_levels_pop_and_sections_without_body_give_no_chunk() -> None:
    text = "# A\n## B\nb\n### C\nc\n## D\nd\n    # indented code\n#nothashtag\n# E\ne"
    chunks = Chunker.markdown().split(text)
    assert [(c.heading, c.body) for c in chunks] == [
        ("A > B", "b"),
        ("A > B > C", "c"),
        ("A > D", "d\n    # indented code\n#nothashtag"),
        ("E", "e"),
    ]


def test_plain_chunker_treats_headings_as_text() -> None:
    assert Chunker().split("# A\nbody") == [Chunk(0, "# A\nbody", "", 0, 8)]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"max_tokens": 0},
            "chunker max_tokens is 0; it must be a whole number >= 1 (chunker.max_tokens)",
        ),
        (
            {"max_tokens": True},
            "chunker max_tokens is True; it must be a whole number >= 1 (chunker.max_tokens)",
        ),
        (
            {"max_tokens": 4, "overlap": 4},
            "chunker overlap is 4; it must be a whole number from 0 to 3, below max_tokens=4 (chunker.overlap)",
        ),
        (
            {"max_tokens": 4, "overlap": -1},
            "chunker overlap is -1; it must be a whole number from 0 to 3, below max_tokens=4 (chunker.overlap)",
        ),
        (
            {"overlap": 1.5},
            "chunker overlap is 1.5; it must be a whole number from 0 to 511, below max_tokens=512 (chunker.overlap)",
        ),
    ],
)
def test_bad_settings_are_config_errors_naming_value_and_range(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        Chunker(**kwargs)  # type: ignore[arg-type]
    assert str(info.value) == message
    with pytest.raises(ConfigError):
        Chunker.markdown(**kwargs)  # type: ignore[arg-type]


def test_describe_and_from_settings() -> None:
    assert Chunker().describe() == {
        "max_tokens": 512,
        "overlap": 64,
        "markdown": False,
        "version": CHUNKER_VERSION,
    }
    chunker = Chunker.from_settings(ChunkerSettings(max_tokens=100, overlap=10, markdown=True))
    assert chunker == Chunker.markdown(max_tokens=100, overlap=10)
    assert chunker.describe() == {
        "max_tokens": 100,
        "overlap": 10,
        "markdown": True,
        "version": MARKDOWN_VERSION,
    }
    assert repr(chunker) == "Chunker.markdown(max_tokens=100, overlap=10)"
    # Settings refuse this at load; from_settings checks again for settings built without validation.
    with pytest.raises(ConfigError, match="overlap is 100"):
        Chunker.from_settings(ChunkerSettings.model_construct(max_tokens=100, overlap=100, markdown=False))


def _imported_outside_the_standard_library(path: str) -> set[str]:
    tree = ast.parse(Path(path).read_text())
    modules = {
        (node.module or "") if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    return {m for m in modules if m.split(".")[0] not in sys.stdlib_module_names}


def test_chunking_imports_only_the_standard_library_and_stores_leaf_modules() -> None:
    outside = _imported_outside_the_standard_library(chunking.__file__)
    assert outside == {"store.errors", "store.settings", "store.calls.tokens", "worker.pipeline.markdown"}
    assert _imported_outside_the_standard_library(markdown_structure.__file__) == set()


def test_all_is_honest() -> None:
    public = {
        n for n in vars(chunking) if not n.startswith("_") and getattr(chunking, n).__class__.__name__ != "module"
    }
    imported = {"Callable", "ChunkerSettings", "ConfigError", "Iterator", "annotations", "dataclass", "default"}
    imported |= {"HEADING_SEPARATOR", "Section", "Span", "fenced_blocks", "sections"}
    assert set(chunking.__all__) == public - imported


# --- properties: plain text ----------------------------------------------------------------------

word = st.one_of(
    st.text(alphabet="abcdefghijklmnopqrstuvwxyzé", min_size=1, max_size=9),
    st.text(alphabet="xyz", min_size=10, max_size=60),
)
punctuation = st.sampled_from(["", "", "", ".", "!", "?", ",", '."', ".)", "…"])
separator = st.sampled_from([" ", " ", " ", "  ", "\n", "\n\n", "\n \n", "\t", "\r\n\r\n", "\u00a0", "\n\n\n"])
prose = st.lists(st.tuples(word, punctuation, separator), max_size=60).map(
    lambda parts: "".join(w + p + s for w, p, s in parts)
)
any_text = st.one_of(prose, prose.map(lambda t: "  \n" + t), st.text(max_size=300))


@st.composite
def chunkers(draw: st.DrawFn, *, markdown: bool = False) -> Chunker:
    max_tokens = draw(st.integers(1, 30))
    overlap = draw(st.integers(0, max_tokens - 1))
    return Chunker(max_tokens, overlap, markdown=markdown)


def _word_starts(text: str, start: int, end: int) -> list[int]:
    return [m.start() for m in re.finditer(r"(?<!\S)\S", text) if start <= m.start() < end]


@PROPERTY
@given(chunkers(), any_text)
def test_chunks_are_stripped_slices_that_cover_the_text_in_order(chunker: Chunker, text: str) -> None:
    chunks = chunker.split(text)
    if not text.strip():
        assert chunks == []
        return
    assert [c.index for c in chunks] == list(range(len(chunks)))
    for chunk in chunks:
        assert chunk.text == text[chunk.start : chunk.end] == chunk.text.strip() != ""
        assert chunk.heading == ""
    assert chunks[0].start == len(text) - len(text.lstrip())
    assert chunks[-1].end == len(text.rstrip())
    for previous, chunk in itertools.pairwise(chunks):
        assert previous.start < chunk.start and previous.end < chunk.end
        # Between neighbours that do not overlap there is only whitespace.
        assert text[previous.end : chunk.start].strip() == ""


@PROPERTY
@given(chunkers(), any_text)
def test_no_chunk_exceeds_max_tokens(chunker: Chunker, text: str) -> None:
    # A word longer than a chunk is cut into pieces of exactly max_tokens, so even those fit.
    for chunk in chunker.split(text):
        assert estimate_tokens(chunk.text) <= chunker.max_tokens


@PROPERTY
@given(chunkers(), any_text)
def test_neighbours_share_a_word_aligned_tail_of_at_most_overlap_tokens_as_long_as_fits(
    chunker: Chunker, text: str
) -> None:
    chunks = chunker.split(text)
    limit, overlap = chunker.max_tokens * 4, chunker.overlap * 4
    for previous, chunk in itertools.pairwise(chunks):
        shared = text[chunk.start : previous.end]
        assert estimate_tokens(shared) <= chunker.overlap
        if shared:
            assert previous.text.endswith(shared) and chunk.text.startswith(shared)
            assert text[chunk.start - 1].isspace(), "the overlap starts at a word start"
        # The overlap is as long as it can be: one more word would break a limit.
        longer = _word_starts(text, previous.start + 1, min(chunk.start, previous.end))
        if longer:
            start = longer[-1]
            assert previous.end - start > overlap or chunk.end - start > limit


@settings(max_examples=60, deadline=None)
@given(chunkers(), st.integers(3, 8))
def test_overlap_is_close_to_overlap_tokens_for_prose_of_short_words(chunker: Chunker, size: int) -> None:
    text = " ".join(f"w{i % 10 ** (size - 1):0{size - 1}d}" for i in range(200))
    chunks = chunker.split(text)
    for previous, chunk in itertools.pairwise(chunks):
        shared = max(0, previous.end - chunk.start)
        # Short of the target by less than one word and its space, unless the new word would not fit.
        if chunker.overlap * 4 + 2 * (size + 1) <= chunker.max_tokens * 4:
            assert shared > chunker.overlap * 4 - (size + 1)


@PROPERTY
@given(chunkers(), any_text)
def test_text_that_fits_is_one_chunk_and_splitting_is_deterministic(chunker: Chunker, text: str) -> None:
    chunks = chunker.split(text)
    assert chunks == chunker.split(text) == Chunker(chunker.max_tokens, chunker.overlap).split(text)
    stripped = text.strip()
    if stripped and estimate_tokens(stripped) <= chunker.max_tokens:
        start = len(text) - len(text.lstrip())
        assert chunks == [Chunk(0, stripped, "", start, start + len(stripped))]


@PROPERTY
@given(st.text(alphabet=" \t\n\r\u00a0\u2003\x0b\x0c", max_size=50), chunkers(), st.booleans())
def test_blank_text_never_gives_chunks(text: str, chunker: Chunker, markdown: bool) -> None:
    assert Chunker(chunker.max_tokens, chunker.overlap, markdown=markdown).split(text) == []


def test_the_word_level_fast_path_cuts_as_the_generic_levels_do() -> None:
    """``_words`` is ``_fit`` at its last level without a call per word: the same pieces, long words cut."""
    import random

    from worker.pipeline.chunker import _BY_WHITESPACE, _fit, _strip, _words

    rng = random.Random(3)
    parts = ["word", "x" * 300, "é", "\u00a0", "\u2003", " ", "\n", "\t", "ü" * 50, "."]
    for _ in range(2000):
        text = "".join(rng.choice(parts) for _ in range(rng.randint(0, 60)))
        start, end = _strip(text, 0, len(text))
        budget = rng.choice([4, 16, 64, 256])
        generic = [p for s, e in _BY_WHITESPACE(text, start, end) for p in _fit(text, s, e, budget, ())]
        assert list(_words(text, start, end, budget)) == generic, (text, budget)


def test_a_heading_with_no_body_and_no_section_under_it_is_a_chunk_of_its_own() -> None:
    """A document of headings gave no chunk at all, and a last heading with nothing after it was lost
    (issue 32, defect 7); a heading whose subsections carry it in their paths still gives none."""
    chunker = Chunker.markdown()
    assert [c.text for c in chunker.split("# Refund policy")] == ["Refund policy"]
    assert [c.text for c in chunker.split("# A\nbody a\n# B")] == ["A\n\nbody a", "B"]
    assert [c.text for c in chunker.split("# A\n## A1\ntext")] == ["A > A1\n\ntext"]
    assert [c.text for c in chunker.split("intro\n# A\n\n# B\nb")] == ["intro", "A", "B\n\nb"]
    assert Chunker().split("# Refund policy")[0].text == "# Refund policy"  # plain mode: text as it is
