"""store.query reads the settings, and searches the same store the writers use."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

import store.query as query
from store import Filter, VectorRecord, load_settings
from store.process.defaults import use_client
from tests.backends import unique_name


@pytest.fixture
def settings_file(tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = tmp_path / "vectorsync.toml"
    path.write_text(f'[vectors]\nstore = "pgvector"\nurl = "{postgres_url}"\ndimensions = 4\n')
    monkeypatch.setenv("VECTORSYNC_CONFIG", str(path))
    previous = use_client(None)  # the default client is built from this file at the first search
    yield path
    built = use_client(previous)
    if built is not None:
        built.close()


def test_search_and_asearch_use_the_configured_store(settings_file: Path) -> None:
    writer = query.store_from_settings(load_settings())
    name = unique_name()
    writer.get_collection(name, create=True).upsert_many(
        [
            VectorRecord("a", [1, 0, 0, 0], "alpha", {"kind": "call"}),
            VectorRecord("b", [0.9, 0.1, 0, 0], "beta", {"kind": "email"}),
        ]
    )
    assert [m.id for m in query.search(name, [1, 0, 0, 0])] == ["a", "b"]
    assert [m.id for m in query.search(name, [1, 0, 0, 0], filter={"kind": "email"})] == ["b"]
    assert [m.id for m in query.search(name, [1, 0, 0, 0], filter=Filter.eq("kind", "call"), limit=1)] == ["a"]
    found = asyncio.run(query.asearch(name, [1, 0, 0, 0], min_score=0.999))
    assert [m.id for m in found] == ["a"]
    writer.drop_collection(name)
    writer.close()
