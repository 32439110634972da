"""The plan of a migration: its refusals, each naming the fix, and generation 1 as the ledger says it was embedded."""

from __future__ import annotations

import pytest

from store.errors import ConfigError
from store.settings import Settings
from store.state.generations import MemoryGenerations
from store.state.generations.migration import plan
from store.state.ledger import MemoryLedger
from store.state.ledger.base import LedgerEntry
from tests.unit.store.state.generations.test_base import MODELS, settings


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


def test_generation_1_reads_fallback_and_int8_model_names_as_the_ledger_records_them() -> None:
    for recorded in ("fake-large,fake-small", "fake-large+int8"):  # the primary first, then its fallback
        live, _ = plan(settings("other"), MemoryGenerations(), "notes", ["small"], embedded={recorded})
        assert live.chain == ("large",), recorded
