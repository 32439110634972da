"""Where writes go while a generation builds: a batch written to two generations counts each record by its worst
outcome, a worker that cannot embed the new one still writes the live one, and an empty run never switches."""

from __future__ import annotations

from dataclasses import replace

import pytest

from store.settings import Settings
from store.state.generations import MemoryGenerations
from store.state.generations.migration import plan
from store.state.generations.routing import switch_when_built
from store.state.ledger import MemoryLedger
from tests.unit.store.state.generations.test_base import MODELS, begin, run
from worker.pipeline.batch import BatchResult
from worker.tasks.policy import combined


def load(ids: list[str] | None) -> list[dict[str, object]]:
    """The Python source of these tests' collection: one record, ``a``."""
    return [{"id": "a", "text": "alpha beta gamma", "metadata": {}}] if ids is None or "a" in ids else []


def test_a_batch_written_to_two_generations_counts_each_record_by_its_worst_outcome() -> None:
    live = BatchResult(indexed=["1", "2"], skipped=["3"], deleted=["4"], chunks=3)
    building = BatchResult(
        indexed=["1", "3"],
        retry={"2": "EmbeddingError: down"},
        deleted=["4"],
        failed={"5": "InputError: too long"},
        chunks=2,
        retry_after=4.0,
    )
    both = combined({"notes": live, "notes__g2": building})
    assert sorted(both.indexed) == ["1", "3"] and both.deleted == ["4"] and both.skipped == []
    assert both.retry == {"2": "notes__g2: EmbeddingError: down"}
    assert both.failed == {"5": "notes__g2: InputError: too long"}
    assert (both.chunks, both.retry_after) == (5, 4.0)
    assert combined({"notes": live}) is live


def test_a_run_that_read_nothing_never_switches_a_collection_to_an_empty_generation() -> None:
    registry = MemoryGenerations()
    begin(registry, "empty")
    registry.set_run("empty", 2, "r1")
    nothing = replace(run("empty__g2", "r1"), total=0, done=0)
    assert switch_when_built(registry, nothing) is None and registry.alias("empty").live == 1  # type: ignore[union-attr]


def test_a_generation_a_worker_cannot_embed_fails_its_records_there_and_the_live_one_is_still_written(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from worker.runtime.context import WorkerContext

    monkeypatch.delenv("VS_TEST_MISSING_KEY", raising=False)
    keyed = {
        "provider": "openai",
        "model": "text-embedding-3-small",
        "dimensions": 12,
        "api_key_env": "VS_TEST_MISSING_KEY",
        "base_url": "http://127.0.0.1:9/v1",
    }
    config = Settings(
        models={**MODELS, "keyed": keyed},
        embeddings={"chain": ["small"], "cache_ttl_days": 0},
        vectors={"store": "memory", "dimensions": 8},
        collections={"notes": {"source": {"kind": "python", "loader": f"{__name__}:load"}}},
    )
    ledger = MemoryLedger()
    live, new = plan(
        config.model_copy(update={"vectors": config.vectors.model_copy(update={"store": "pgvector"})}),
        ledger.generations,
        "notes",
        ["keyed"],
    )
    ledger.generations.begin(live, new)
    ctx = WorkerContext.from_settings(config, ledger=ledger)
    try:
        written = ctx.written("notes", ["a"], lambda jobs: jobs.indexer.index(["a"]))
    finally:
        ctx.close()
    assert written["notes"].indexed == ["a"]
    assert list(written["notes__g2"].failed) == ["a"] and "VS_TEST_MISSING_KEY" in written["notes__g2"].failed["a"]
