"""The chunk limit stops the chunker early (issue 48, defect 9a): one 31 MB record took ``--plan`` to 870 MB, since
the whole text was cut (a piece per word, then every chunk) before ``limits.max_chunks_per_record`` was checked.
Memory is measured with tracemalloc (what Python allocated at its peak), never by timing: a text cut only up to
the limit costs the limit's chunks, whatever the text's length; a worker's batch and a plan that meet such a
record fail it alone, holding no more than the text's own copies (its content hash) beside it."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from producer import testing
from store.settings import Settings
from store.state.ledger import MemoryLedger
from worker.pipeline.chunker import Chunker
from worker.pipeline.indexer import Indexer
from worker.repair.plan_reading import PlanReading
from worker.runtime.context import WorkerContext

#: Chunks a record may make in these tests, and the chunker's size: 64 tokens, 256 characters a chunk.
LIMIT = 10
MAX_TOKENS = 64
#: Prose of about 4 MB: 650,000 words, in sentences and paragraphs.
PROSE = "\n\n".join(" ".join(f"word{i % 97}" for i in range(p, p + 200)) + "." for p in range(3300))
#: Markdown of about 4 MB: headings, prose and small code fences.
MARKDOWN = "".join(
    f"# Part {p}\n## Section {p}\nsome prose about part {p}, in words.\n```\ncode {p}\n```\n" for p in range(60_000)
)
#: One Markdown section of 40,000 small code fences (a fence is one piece; each was kept for the overlap rule).
FENCED = "# Code\n" + "```\nx = 1\n```\n" * 40_000
#: The bytes a text cut up to ``LIMIT`` chunks may take: the chunks themselves and what cutting holds at once,
#: generously; none of it grows with the text.
BOUND = 64 * 1024 + 10 * LIMIT * 4 * MAX_TOKENS
RECORDS: dict[str, str] = {}


def peak(work: Callable[[], Any]) -> tuple[Any, int]:
    """What ``work`` returns, and the most bytes Python held for it at once."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        done = work()
        return done, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(
    ("text", "markdown"), [(PROSE, False), (MARKDOWN, True), (FENCED, True)], ids=["prose", "markdown", "fenced"]
)
def test_a_text_cut_up_to_a_limit_costs_the_limits_chunks_not_the_texts(text: str, markdown: bool) -> None:
    chunker = Chunker(MAX_TOKENS, 8, markdown=markdown)
    assert len(text) > 5 * BOUND
    texts, held = peak(lambda: chunker.texts(text, limit=LIMIT + 1))
    assert len(texts) == LIMIT + 1
    assert held < BOUND, f"cutting {LIMIT + 1} chunks of a {len(text):,}-character text held {held:,} bytes"
    assert texts == [chunk.text for chunk in chunker.split(text[:20_000])][: LIMIT + 1]


words = st.text(alphabet="ab é\n.#`~", max_size=400)


@settings(max_examples=300, deadline=None)
@given(words, st.integers(1, 12), st.booleans(), st.integers(0, 40))
def test_the_first_chunks_are_the_split_texts_first_chunks(text: str, max_tokens: int, md: bool, limit: int) -> None:
    chunker = Chunker(max_tokens, max_tokens // 3, markdown=md)
    whole = chunker.split(text)
    assert chunker.texts(text, limit=limit) == [chunk.text for chunk in whole][:limit]
    assert list(chunker.chunks(text)) == whole


def load(ids: list[str] | None) -> list[dict[str, object]]:
    """This module's Python source: ``RECORDS``, each text the very string kept there (no copy is made)."""
    return [{"id": key, "text": text, "metadata": {}} for key, text in RECORDS.items() if ids is None or key in ids]


def worker_settings() -> dict[str, Any]:
    return {
        "vectors": {"store": "memory", "dimensions": 8},
        "embeddings": {"cache_ttl_days": 0},
        "limits": {"max_chunks_per_record": LIMIT},
        "collections": {
            "notes": {
                "source": {"kind": "python", "loader": f"{__name__}:load"},
                "chunker": {"max_tokens": MAX_TOKENS, "overlap": 8},
            }
        },
    }


@pytest.fixture
def huge() -> Iterator[str]:
    RECORDS.update({"huge": PROSE, "small": "a few words"})
    yield PROSE
    RECORDS.clear()


def test_a_batch_fails_a_record_over_the_chunk_limit_without_cutting_it_whole(huge: str) -> None:
    ctx = WorkerContext.from_settings(Settings.model_validate(worker_settings()), ledger=MemoryLedger())
    try:
        indexer = Indexer(ctx.pipeline("notes"))
        indexer.index(["small"])  # the parts a first batch opens are not this batch's
        result, held = peak(lambda: indexer.index(["huge", "small"]))
    finally:
        ctx.close()
    assert f"over limits.max_chunks_per_record ({LIMIT}): split the record" in result.failed["huge"]
    assert held < 4 * len(huge), f"a batch held {held:,} bytes for a {len(huge):,}-character record"


def test_a_plan_counts_a_record_over_the_chunk_limit_as_failed_without_cutting_it_whole(huge: str) -> None:
    with testing.queue(worker_settings()) as tasks, PlanReading(tasks.client) as reading:
        tasks.client.plan("notes", reader=reading)  # the parts a first plan opens are not this plan's
        plan, held = peak(lambda: tasks.client.plan("notes", reader=reading))
    assert (plan.new, plan.failed) == (1, 1)
    assert held < 4 * len(huge), f"a plan held {held:,} bytes for a {len(huge):,}-character record"
