"""Generations: the registry (memory and PostgreSQL alike), which generation a read or a write goes to, the
plan of a migration and its refusals, the switch, and a batch's outcome over two generations.

GenerationsContract runs here on the memory registry, and on PostgreSQL in
tests/integration/store/state/test_generations.py."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from store.errors import ConfigError
from store.settings import Settings
from store.state.generations import Generation, Generations, MemoryGenerations, parse_name
from store.state.generations.migration import plan
from store.state.generations.routing import reading, switch_now, switch_when_built, writing
from store.state.ledger import MemoryLedger, RunProgress, RunStatus
from store.state.ledger.base import LedgerEntry
from tests.backends import unique_name
from worker.pipeline.batch import BatchResult
from worker.tasks.policy import combined

MODELS = {
    "small": {"provider": "fake", "model": "fake-small", "dimensions": 8},
    "large": {"provider": "fake", "model": "fake-large", "dimensions": 12},
    "other": {"provider": "fake", "model": "fake-other", "dimensions": 16},
}


def load(ids: list[str] | None) -> list[dict[str, object]]:
    """The Python source of these tests' collection: one record, ``a``."""
    return [{"id": "a", "text": "alpha beta gamma", "metadata": {}}] if ids is None or "a" in ids else []


def settings(chain: str = "small", *, kind: str = "python", store: str = "pgvector") -> Settings:
    source = {"kind": kind, "loader": f"{__name__}:load"} if kind == "python" else {"kind": kind}
    return Settings(
        models=MODELS,
        embeddings={"chain": [chain]},
        vectors={"store": store, "dimensions": 8},
        collections={"notes": {"source": source}},
    )


def begin(registry: Generations, name: str, chain: str = "large", number: int = 2) -> Generation:
    live, new = plan(settings(), MemoryGenerations(), "notes", [chain])  # planned for a collection never migrated
    registry.begin(replace(live, collection=name), replace(new, collection=name, number=number))
    return new


def test_names_of_generations() -> None:
    assert parse_name("notes__g2") == ("notes", 2)
    assert parse_name("my__notes__g12") == ("my__notes", 12)
    assert parse_name("notes") == ("notes", None) and parse_name("notes__g0") == ("notes__g0", None)
    first = Generation("notes", 1, ("small",))
    assert (first.name, first.physical) == ("notes__g1", "notes")
    assert replace(first, number=3).physical == "notes__g3"
    with pytest.raises(ValueError, match="ends like a generation"):
        Settings(collections={"notes__g2": {}})


def run(collection: str, run_id: str, *, failed: int = 0, status: RunStatus = RunStatus.DONE) -> RunProgress:
    when = datetime.now(UTC)
    return RunProgress(run_id, collection, status, 10, 10 - failed, 0, failed, False, when, when)


def test_plan_refuses_what_cannot_be_migrated_naming_the_fix() -> None:
    registry = MemoryGenerations()
    with pytest.raises(ConfigError, match="not declared"):
        plan(settings(), registry, "elsewhere", ["large"])
    with pytest.raises(ConfigError, match="pushed documents"):
        plan(settings(kind="push"), registry, "notes", ["large"])
    with pytest.raises(ConfigError, match="memory"):
        plan(settings(store="memory"), registry, "notes", ["large"])
    local = settings(store="qdrant").model_copy(
        update={"vectors": settings().vectors.model_copy(update={"store": "qdrant", "url": "/tmp/qdrant-folder"})}
    )
    with pytest.raises(ConfigError, match="local mode"):
        plan(local, registry, "notes", ["large"])
    with pytest.raises(ConfigError, match="already"):
        plan(settings(), registry, "notes", ["small"])
    with pytest.raises(ConfigError, match="one size"):
        plan(settings(), registry, "notes", ["large", "other"])
    with pytest.raises(ConfigError, match="no configured model missing"):
        plan(settings(), registry, "notes", ["missing"])
    with pytest.raises(ConfigError, match="longer than 48"):
        plan(
            Settings(
                models=MODELS,
                embeddings={"chain": ["small"]},
                collections={"n" * 47: {"source": {"kind": "python", "loader": "x:y"}}},
            ),
            registry,
            "n" * 47,
            ["large"],
        )


def test_generation_1_is_what_the_ledger_says_embedded_it_even_when_the_settings_name_the_new_chain() -> None:
    ledger = MemoryLedger()
    with ledger.locked("notes", ["1"]) as held:
        held.record_indexed([LedgerEntry("1", "h", "fake-small", 1)])
    live, new = plan(settings("large"), ledger.generations, "notes", ["large"], embedded=ledger.models("notes"))
    assert (live.chain, live.dimensions, new.chain, new.number) == (("small",), 8, ("large",), 2)
    with pytest.raises(ConfigError, match="which no \\[models.NAME\\] entry"):
        plan(settings(), ledger.generations, "notes", ["large"], embedded={"text-embedding-3-small"})


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


def test_generation_1_reads_fallback_and_int8_model_names_as_the_ledger_records_them() -> None:
    for recorded in ("fake-large,fake-small", "fake-large+int8"):  # the primary first, then its fallback
        live, _ = plan(settings("other"), MemoryGenerations(), "notes", ["small"], embedded={recorded})
        assert live.chain == ("large",), recorded


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


class GenerationsContract:
    """What every generations registry does; a subclass gives the ``registry`` fixture."""

    def test_a_collection_never_migrated_is_its_own_generation_under_the_settings_chain(
        self, registry: Generations
    ) -> None:
        name = unique_name("gen")
        assert registry.alias(name) is None
        [only] = writing(settings(), registry, name)
        assert only == reading(settings(), registry, name)
        assert (only.physical, only.chain, only.dimensions, only.registered) == (name, ("small",), 8, False)

    def test_while_building_reads_go_to_the_live_generation_and_writes_to_both(self, registry: Generations) -> None:
        name = unique_name("gen")
        begin(registry, name)
        alias = registry.alias(name)
        assert alias is not None and alias.live == 1 and alias.building is not None
        assert reading(settings(), registry, name).physical == name
        assert [g.physical for g in writing(settings(), registry, name)] == [name, f"{name}__g2"]
        assert [g.physical for g in writing(settings(), registry, f"{name}__g2")] == [f"{name}__g2"]  # a run's batches
        large = reading(settings(), registry, f"{name}__g2")
        assert (large.chain, large.dimensions, large.models["large"]["model"]) == (("large",), 12, "fake-large")
        with pytest.raises(ConfigError, match="has no generation 5"):
            reading(settings(), registry, f"{name}__g5")

    def test_a_second_migration_is_refused_while_one_builds_naming_the_ways_out(self, registry: Generations) -> None:
        name = unique_name("gen")
        begin(registry, name)
        with pytest.raises(ConfigError, match=rf"already migrating to {name}__g2.*collections drop {name}__g2"):
            begin(registry, name, "other", number=3)

    def test_the_switch_is_compare_and_set_and_the_live_generation_cannot_be_forgotten(
        self, registry: Generations
    ) -> None:
        name = unique_name("gen")
        begin(registry, name)
        assert not registry.switch(name, 2, expected=2)  # someone else's view of what is live: nothing happens
        assert registry.switch(name, 2, expected=1)
        assert not registry.switch(name, 2, expected=1)  # a second switch (a redelivered batch) changes nothing
        alias = registry.alias(name)
        assert alias is not None and alias.live == 2 and alias.building is None and alias.switched_at is not None
        assert [g.physical for g in writing(settings(), registry, name)] == [f"{name}__g2"]  # the old one: not written
        with pytest.raises(ConfigError, match="cannot be dropped alone"):
            registry.forget(name, 2)
        registry.forget(name, 1)
        alias = registry.alias(name)
        assert alias is not None and [g.number for g in alias.generations] == [2]
        registry.forget(name)
        assert registry.alias(name) is None

    def test_the_run_that_builds_a_generation_switches_it_only_when_done_without_failures(
        self, registry: Generations
    ) -> None:
        name = unique_name("gen")
        begin(registry, name)
        registry.set_run(name, 2, "r1")
        assert switch_when_built(registry, run(f"{name}__g2", "r1", status=RunStatus.INDEXING)) is None
        assert switch_when_built(registry, run(f"{name}__g2", "other")) is None  # another run of it: not this one
        assert switch_when_built(registry, run(f"{name}__g2", "r1", failed=1)) is None
        assert registry.alias(name).live == 1  # type: ignore[union-attr]
        with pytest.raises(ConfigError, match="is not built"):
            switch_now(registry, name, run(f"{name}__g2", "r1", status=RunStatus.RUNNING))
        assert switch_now(registry, name, run(f"{name}__g2", "r1", failed=1)).number == 2  # --switch accepts failures
        assert switch_when_built(registry, run(f"{name}__g2", "r1")) is None


class TestMemoryGenerations(GenerationsContract):
    @pytest.fixture
    def registry(self) -> Generations:
        return MemoryGenerations()
