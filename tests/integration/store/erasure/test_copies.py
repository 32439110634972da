"""Erasure you can prove: once a record's delete is indexed (and after ``vectorsync forget``), no table, no
posting, no statistic, no cache entry and no ledger row holds a trace of its text, its text's hash or its
vector, on pgvector and on Qdrant's local mode; and a collection never hears of another's cached texts."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import pytest
import redis
import sqlalchemy as sa

from store.client import Client
from store.connect.postgres import engine_url
from store.erasure.receipt import forget
from store.settings import Settings
from store.vectors.records import text_digest
from tests.integration.state_db import fresh_database
from worker.pipeline.indexer import Indexer
from worker.repair.plan_reading import PlanReading
from worker.runtime.context import WorkerContext

#: A term no other text holds: its statistics, postings and sparse weights must go with the record.
SECRET = "zanzibarqx"
RECORDS: dict[str, dict[str, Any]] = {}
TEXTS = {"a": f"the {SECRET} vault opens on tuesdays", "b": "plain note about renewals", "c": "shared words here"}


def load_records(ids: list[str] | None) -> Iterable[dict[str, Any]]:
    """The loader of both collections: ``RECORDS`` among ``ids``."""
    return [record for key, record in RECORDS.items() if ids is None or key in ids]


def _settings(backend: str, url: str, cache_url: str, folder: Any) -> Settings:
    loader = {"kind": "python", "loader": f"{__name__}:load_records"}
    vectors: dict[str, Any] = {"store": backend, "url": url if backend == "pgvector" else str(folder), "dimensions": 8}
    return Settings.model_validate(
        {
            "vectors": vectors,
            "state": {"url": url},
            "cache": {"url": cache_url},
            "broker": {"url": cache_url, "coalesce_seconds": 0},
            "models": {"hashed": {"provider": "fake", "model": "fake", "dimensions": 8}},
            "embeddings": {"chain": ["hashed"]},
            "collections": {
                "notes": {"source": loader, "search": {"keywords": True}},
                "other": {"source": loader, "search": {"keywords": True}},
            },
        }
    )


@pytest.fixture(params=["pgvector", "qdrant"])
def parts(
    request: pytest.FixtureRequest, postgres_url: str, scratch_redis_url: str, tmp_path: Any
) -> Iterator[tuple[Settings, str]]:
    redis.Redis.from_url(scratch_redis_url).flushdb()
    with fresh_database(postgres_url) as url:
        yield _settings(request.param, url, scratch_redis_url, tmp_path / "qdrant"), url


def _traces_in_tables(url: str) -> dict[str, int]:
    """Rows of every table of the database that hold the secret text, its term, or its text's hash."""
    digest = text_digest(TEXTS["a"])
    engine = sa.create_engine(engine_url(url), poolclass=sa.NullPool)
    found: dict[str, int] = {}
    try:
        with engine.connect() as conn:
            tables = conn.execute(sa.text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")).scalars()
            for table in list(tables):
                query = sa.text(
                    f'SELECT count(*) FROM "{table}" t WHERE position(:term in t::text) > 0 '
                    "OR position(:digest in lower(t::text)) > 0"
                )
                hits = conn.execute(query, {"term": SECRET, "digest": digest}).scalar_one()
                if hits:
                    found[table] = hits
    finally:
        engine.dispose()
    return found


def _traces_in_redis(cache_url: str, vector: bytes) -> list[str]:
    """Keys of Redis whose name or value holds the text, its term or its vector's bytes."""
    client = redis.Redis.from_url(cache_url)
    found = []
    for key in client.scan_iter(count=1000):
        kind = client.type(key)
        values = (
            [client.get(key)] if kind == b"string" else list(client.hgetall(key).values()) if kind == b"hash" else []
        )
        if any(SECRET.encode() in (v or b"") or vector in (v or b"") for v in values) or SECRET.encode() in key:
            found.append(key.decode(errors="replace"))
    return found


def _traces_in_qdrant(context: WorkerContext, vector: list[float]) -> list[str]:
    """Points of every Qdrant collection whose payload or vectors hold the text or its vector."""
    client = context.store._client  # type: ignore[attr-defined]
    found = []
    for name in context.store.list_collections():
        points, _ = client.scroll(name, limit=10_000, with_payload=True, with_vectors=True)
        for point in points:
            dense = point.vector if isinstance(point.vector, list) else (point.vector or {}).get("")
            if SECRET in repr(point.payload) or (dense is not None and np.allclose(dense, vector, atol=1e-3)):
                found.append(f"{name}/{point.id}")
    return found


def test_a_deleted_record_leaves_no_trace_and_no_collection_hears_of_another_s_texts(
    parts: tuple[Settings, str],
) -> None:
    settings, url = parts
    RECORDS.clear()
    RECORDS.update({key: {"id": key, "text": text} for key, text in TEXTS.items()})
    context = WorkerContext.from_settings(settings)
    try:
        notes, other = Indexer(context.pipeline("notes")), Indexer(context.pipeline("other"))
        notes.index(list(TEXTS))
        vector = list(context.embeddings.chain.embed_batch([TEXTS["a"]])[0][0])  # not through the cache
        client = Client(settings, ledger=context.ledger, store=context.store, embeddings=context.embeddings)
        with PlanReading(client) as reading:  # "other" holds the same texts: the cache of "notes" is not its
            assert client.plan("other", reader=reading).cached == 0
        other.index(["c"])
        raw = np.asarray(vector, dtype="<f4").tobytes()
        assert _traces_in_redis(settings.cache_url, raw)  # the scans find what is there before the delete
        if settings.vectors.store == "pgvector":
            assert _traces_in_tables(url)
        del RECORDS["a"]
        notes.index(["a"])  # its delete indexed: everything derived from it goes
        assert _traces_in_redis(settings.cache_url, raw) == []
        assert _traces_in_tables(url) == {}  # the ledger, the runs, the failures; pgvector's rows, stats, postings
        if settings.vectors.store == "qdrant":
            assert _traces_in_qdrant(context, vector) == []
        assert "a" not in context.ledger.entries("notes", ["a"])
        # forget on demand: "c" is held by both collections; erased from "notes", "other" keeps its own
        receipt = forget(client, "notes", ["c"])
        held = {place.place: place.removed for place in receipt.places}
        assert held["chunks in notes, with their keyword statistics and postings"] == 1
        assert held["embedding cache of notes (Redis)"] == 1
        assert held["ledger entries of notes"] == 1
        assert other.pipeline.collection.total() == 1
        client.close()
    finally:
        context.close()
        RECORDS.clear()


def test_the_cache_key_is_found_again_from_the_hash_a_chunk_keeps() -> None:
    from store.embeddings.cache import cache_key, hashed_key

    assert cache_key("m", 8, "some text", scope="notes") == hashed_key("m", 8, text_digest("some text"), scope="notes")
    assert cache_key("m", 8, "some text", scope="notes") != cache_key("m", 8, "some text", scope="other")
    assert hashlib.sha256(b"some text").hexdigest() == text_digest("some text")
