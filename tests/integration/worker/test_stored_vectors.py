"""Vectors never bought twice: a chunk text the store already holds for the model (by its hash) is not embedded
again, whatever record holds it, with the embedding cache off. Real PostgreSQL (pgvector, the ledger, the
generations), the fake OpenAI server through the real client counting each call and text; the worker's context and
pipeline in this process."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import pytest

from store.settings import Settings
from store.state.generations import migration
from tests.backends import unique_name
from tests.fake_openai import FAST_RETRIES, FakeOpenAI
from worker.pipeline.indexer import Indexer
from worker.runtime.context import WorkerContext

RECORDS: dict[str, dict[str, Any]] = {}
WORDS = [f"w{i}" for i in range(400)]


def load_records(ids: list[str] | None) -> Iterable[dict[str, Any]]:
    return [r for key, r in RECORDS.items() if ids is None or key in ids]


def text(i: int) -> str:
    return " ".join(WORDS[(i * 37 + j) % len(WORDS)] for j in range(30))


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(dimensions=8) as server:
        yield server


def settings(fake: FakeOpenAI, postgres_url: str, redis_url: str, name: str, *, max_tokens: int = 8) -> Settings:
    def model(model: str, dimensions: int = 8) -> dict[str, Any]:
        sizes = {"dimensions": dimensions, "send_dimensions": dimensions != 8}
        return {"provider": "openai", "model": model, "base_url": fake.url, **sizes}

    return Settings.model_validate(
        {
            "broker": {"url": redis_url},
            "state": {"url": postgres_url},
            "models": {
                "small": model("text-embedding-test"),
                "same": model("text-embedding-test"),  # another entry, the same model at the same size
                "other": model("text-embedding-other"),
                "wide": model("text-embedding-test", 12),
            },
            "embeddings": {"chain": ["small"], "cache_ttl_days": 0, "batch_size": 16, **FAST_RETRIES},
            "vectors": {"store": "pgvector", "url": postgres_url, "dimensions": 8},
            "collections": {
                name: {
                    "source": {"kind": "python", "loader": f"{__name__}:load_records"},
                    "chunker": {"max_tokens": max_tokens, "overlap": 0},
                }
            },
        }
    )


@pytest.fixture
def world(fake: FakeOpenAI, postgres_url: str, redis_url: str) -> Iterator[tuple[str, WorkerContext]]:
    RECORDS.clear()
    name = unique_name("reuse")
    ctx = WorkerContext.from_settings(settings(fake, postgres_url, redis_url, name))
    try:
        yield name, ctx
    finally:
        ctx.close()


def texts_sent(fake: FakeOpenAI, since: int = 0) -> int:
    return sum(len(request.inputs) for request in fake.requests[since:])


def test_a_metadata_only_edit_makes_no_provider_call(world: tuple[str, WorkerContext], fake: FakeOpenAI) -> None:
    name, ctx = world
    RECORDS["a"] = {"id": "a", "text": text(1), "metadata": {"kind": "call"}}
    pipeline = ctx.pipeline(name)
    indexer = Indexer(pipeline)
    assert pipeline.embeddings.cache is None and indexer.index(["a"]).indexed == ["a"]
    calls, reused = fake.calls, pipeline.embeddings.stats.reused
    RECORDS["a"]["metadata"] = {"kind": "email"}
    assert indexer.index(["a"]).indexed == ["a"]
    assert fake.calls == calls  # 0 provider calls
    assert pipeline.embeddings.stats.reused - reused == len(pipeline.collection.chunks_of("a")) == 4
    assert {m.metadata["kind"] for m in pipeline.collection.search([1.0] * 8, limit=10)} == {"email"}


def test_a_text_another_record_holds_is_not_bought(world: tuple[str, WorkerContext], fake: FakeOpenAI) -> None:
    name, ctx = world
    RECORDS["a"] = {"id": "a", "text": text(1), "metadata": {}}
    pipeline = ctx.pipeline(name)
    indexer = Indexer(pipeline)
    indexer.index(["a"])
    calls = fake.calls
    RECORDS["b"] = {"id": "b", "text": text(1), "metadata": {}}
    assert indexer.index(["b"]).indexed == ["b"] and fake.calls == calls
    RECORDS["c"] = {"id": "c", "text": text(1) + "\n\n" + text(2), "metadata": {}}  # a's chunks, then others
    indexer.index(["c"])
    held = {chunk.text for chunk in pipeline.collection.chunks_of("a")}
    new = {chunk.text for chunk in pipeline.collection.chunks_of("c")} - held
    assert len(held) == 4 and new and fake.calls == calls + 1 and texts_sent(fake, calls) == len(new)


def test_a_chunker_change_embeds_only_texts_not_stored(
    world: tuple[str, WorkerContext], fake: FakeOpenAI, postgres_url: str, redis_url: str
) -> None:
    name, ctx = world
    ids = [str(i) for i in range(10)]
    # 7 records shorter than either chunk size (one chunk, as it was) and 3 of 30 words, cut anew
    RECORDS.update({i: {"id": i, "text": text(int(i)) if int(i) < 3 else f"note {i}", "metadata": {}} for i in ids})
    Indexer(ctx.pipeline(name)).index(ids)
    before, calls = {c.text for i in ids for c in ctx.pipeline(name).collection.chunks_of(i)}, fake.calls
    changed = WorkerContext.from_settings(settings(fake, postgres_url, redis_url, name, max_tokens=16))
    try:
        pipeline = changed.pipeline(name)
        assert sorted(Indexer(pipeline).index(ids).indexed) == ids
        now = {c.text for i in ids for c in pipeline.collection.chunks_of(i)}
    finally:
        changed.close()
    assert len(now & before) >= 7 and now - before  # some chunk texts kept, others new
    assert texts_sent(fake, calls) == len(now - before)  # exactly the texts the store did not hold
    assert fake.calls - calls == -(-len(now - before) // 16)


def migrate(ctx: WorkerContext, name: str, chain: list[str], ids: list[str]) -> None:
    """Begin a generation of ``chain`` and build it as its run's batches do (a first load: fresh), then switch."""
    registry = ctx.client.generations
    assert registry is not None
    new = migration.begin(ctx.settings, registry, name, chain, embedded_by=lambda c: ctx.ledger.models(c))
    ctx.written(new.name, ids, lambda jobs: jobs.indexer.index(ids, fresh=True))
    assert registry.switch(name, new.number, expected=1)


def test_migrate_on_the_same_model_copies_every_vector(world: tuple[str, WorkerContext], fake: FakeOpenAI) -> None:
    name, ctx = world
    ids = [str(i) for i in range(20)]
    RECORDS.update({i: {"id": i, "text": text(int(i)), "metadata": {"n": int(i)}} for i in ids})
    Indexer(ctx.pipeline(name)).index(ids)
    queries = [[float((i * q) % 5) + 0.5 for i in range(8)] for q in range(1, 6)]
    found = [[(m.id, round(m.score, 5)) for m in ctx.router.read(name).search(q, limit=5)] for q in queries]
    calls, chunks = fake.calls, ctx.router.read(name).count()
    migrate(ctx, name, ["same"], ids)
    assert fake.calls == calls  # 0 provider calls
    assert ctx.router.read(name).name == f"{name}__g2" and ctx.router.read(name).count() == chunks >= 80
    assert [[(m.id, round(m.score, 5)) for m in ctx.router.read(name).search(q, limit=5)] for q in queries] == found


@pytest.mark.parametrize("chain", ["other", "wide"])
def test_another_model_or_size_never_reuses(world: tuple[str, WorkerContext], fake: FakeOpenAI, chain: str) -> None:
    name, ctx = world
    ids = [str(i) for i in range(5)]
    RECORDS.update({i: {"id": i, "text": text(int(i)), "metadata": {}} for i in ids})
    Indexer(ctx.pipeline(name)).index(ids)
    calls, chunks = fake.calls, ctx.router.read(name).count()
    migrate(ctx, name, [chain], ids)
    assert texts_sent(fake, calls) == chunks  # every chunk bought from the new model
    assert ctx.router.read(name).name == f"{name}__g2" and ctx.router.read(name).count() == chunks
