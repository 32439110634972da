"""Filtered search without a server: the exact-or-HNSW choice, and declared indexed fields (Qdrant local mode)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from store import ConfigError
from store.settings import Settings
from store.vectors.backends import open_store

DIMENSIONS = 32


@pytest.mark.parametrize(
    ("estimate", "rows", "path"),
    [
        (1_500, 1_000_000, "exact"),  # few rows: always sorted exactly
        (1_500, 10_000, "exact"),  # even as 15% of a small table
        (9_000, 1_000_000, "exact"),  # 0.9% of the table: HNSW would lose recall
        (9_000, 100_000, "hnsw"),  # 9% of the table: HNSW keeps full recall, faster than sorting
        (20_000, 10_000_000, "hnsw"),  # past the bound, whatever the share
    ],
)
def test_the_path_depends_on_the_rows_and_their_share_of_the_table(estimate: int, rows: int, path: str) -> None:
    from store.vectors.pgvector.planner import choose_path

    assert choose_path(estimate, rows, 10_000) == path


def test_settings_declare_indexed_fields_per_collection(tmp_path: Path) -> None:
    settings = Settings(
        vectors={"store": "memory", "dimensions": DIMENSIONS},
        collections={"notes": {"index": {"fields": {"owner_id": "integer"}}}},
    )
    store = open_store(settings)
    assert store.get_collection("notes", create=True).indexed == {"owner_id": "integer"}
    assert store.get_collection("other", create=True).indexed == {}
    with pytest.raises(ConfigError, match="'size' has type 'number'"):
        store.get_collection("other", create=True).declare_indexes({"size": "number"})


def test_declared_fields_become_qdrant_payload_indexes_of_their_type(tmp_path: Path) -> None:
    pytest.importorskip("qdrant_client")
    from qdrant_client import models

    from store.vectors.qdrant import QdrantStore

    store = QdrantStore(str(tmp_path / "q"), dimensions=DIMENSIONS)
    calls: list[tuple[str, Any]] = []
    real = store._client.create_payload_index

    def recording(collection: str, key: str, **kwargs: Any) -> Any:
        calls.append((key, kwargs["field_schema"]))
        return real(collection, key, **kwargs)

    store._client.create_payload_index = recording  # type: ignore[method-assign]
    store.indexed["notes"] = {"owner_id": "integer", "created_at": "datetime", "kind": "keyword"}
    store.get_collection("notes", create=True)
    assert calls == [
        ("metadata.owner_id", models.PayloadSchemaType.INTEGER),
        ("metadata.created_at", models.PayloadSchemaType.DATETIME),
        ("metadata.kind", models.PayloadSchemaType.KEYWORD),
    ]
    store.close()
