"""A Qdrant store: its collections kept in a folder, one of another size or distance refused, its settings,
and a folder another store holds."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("qdrant_client")

from store.errors import ConfigError, StoreUnavailable
from store.settings import Settings, VectorSettings
from store.vectors.filters import Filter
from store.vectors.qdrant import QdrantStore, QdrantTuning
from tests.unit.store.vectors.qdrant.test_points import make_record


def test_reopening_a_folder_keeps_the_data(tmp_path: Path) -> None:
    folder = str(tmp_path / "qdrant")
    with QdrantStore(folder, dimensions=2) as store:
        store.get_collection("notes", create=True).upsert_many(
            [make_record("a", [1, 0], k="x"), make_record("b", [0, 1], k="y")]
        )
    with QdrantStore(folder, dimensions=2) as store:
        assert store.list_collections() == ["notes"]
        notes = store.get_collection("notes", create=True)
        assert notes.count() == 2
        assert [m.id for m in notes.search([0, 1], filter=Filter.eq("k", "y"))] == ["b"]


def test_a_collection_of_another_size_is_a_config_error(tmp_path: Path) -> None:
    folder = str(tmp_path / "qdrant")
    with QdrantStore(folder, dimensions=8) as store:
        store.ensure_collection("notes")
    with QdrantStore(folder, dimensions=16) as store, pytest.raises(ConfigError) as caught:
        store.ensure_collection("notes")
    assert str(caught.value) == (
        "Qdrant collection 'notes' holds 8-dimensional vectors; settings say 16 (vectors.dimensions): "
        "drop it or use another collection name"
    )


def test_a_collection_of_another_distance_is_a_config_error(tmp_path: Path) -> None:
    folder = str(tmp_path / "qdrant")
    with QdrantStore(folder, dimensions=8, metric="euclidean") as store:
        store.ensure_collection("notes")
    with QdrantStore(folder, dimensions=8, metric="cosine") as store, pytest.raises(ConfigError) as caught:
        store.ensure_collection("notes")
    assert str(caught.value) == (
        "Qdrant collection 'notes' uses Euclid distance; settings say cosine (vectors.metric): "
        "drop it or use another collection name"
    )


def test_drop_collection_removes_it() -> None:
    store = QdrantStore(":memory:", dimensions=2)
    store.get_collection("notes", create=True).upsert(make_record("a", [1, 0]))
    store.drop_collection("notes")
    assert store.list_collections() == []
    assert store.get_collection("notes", create=True).count() == 0


def test_from_settings_builds_a_local_store() -> None:
    settings = Settings(vectors=VectorSettings(store="qdrant", url=":memory:", dimensions=3, metric="dot"))
    store = QdrantStore.from_settings(settings)
    assert (store.dimensions, store.metric, store.index_fields) == (3, "dot", ("record_id",))
    store.get_collection("notes", create=True).upsert(make_record("a", [1, 2, 3]))
    assert store.get_collection("notes", create=True).search([1, 0, 0])[0].score == pytest.approx(1.0)


def test_index_fields_are_checked() -> None:
    with pytest.raises(ConfigError, match="filter field 'owner id' is not allowed"):
        QdrantStore(":memory:", dimensions=2, tuning=QdrantTuning(index_fields=("owner id",)))


def test_a_folder_held_by_another_store_is_store_unavailable(tmp_path: Path) -> None:
    folder = str(tmp_path / "qdrant")
    with QdrantStore(folder, dimensions=2), pytest.raises(StoreUnavailable, match="cannot be opened"):
        QdrantStore(folder, dimensions=2)
