"""The generations seam: a generation's names, and GenerationsContract, what every registry does (which generation a
read or a write goes to, the switch), run on the memory registry in test_memory.py and on PostgreSQL in
tests/integration/store/state/generations/test_postgres.py. The helpers here serve the other tests of the folder."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from store.errors import ConfigError
from store.settings import Settings
from store.state.generations import Generation, Generations, MemoryGenerations, parse_name
from store.state.generations.migration import plan
from store.state.generations.routing import reading, switch_now, switch_when_built, writing
from store.state.ledger import RunProgress, RunStatus
from tests.backends import unique_name

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
