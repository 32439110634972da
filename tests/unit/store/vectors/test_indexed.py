"""Declared indexed fields, without a server: what the settings declare per collection, a type refused by name,
and Qdrant's payload indexes of each type (local mode; on pgvector and a Qdrant server:
tests/integration/store/vectors/pgvector/test_planner.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from store import ConfigError
from store.settings import Settings
from store.vectors.backends import open_store

DIMENSIONS = 32


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
