"""evaluate() end to end over a real collection, on memory and pgvector: text queries embedded by the fake
provider, searched in every mode, scored at record level."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from store.embeddings import Embeddings
from store.evaluation import evaluate, parse_queries
from store.settings import SearchSettings, Settings
from store.vectors import VectorRecord, VectorStore
from tests.backends import StoreFactory, make_store_factory, unique_name

SETTINGS = Settings.model_validate(
    {"vectors": {"store": "memory", "dimensions": 64}, "embeddings": {"cache_ttl_days": 0}}
)
#: Record id -> its chunks: each record has words of its own, and "kestrel" has two chunks.
RECORDS = {
    "kestrel": [
        "The kestrel hovers over motorway verges hunting voles.",
        "A kestrel nest box faces east, two metres up a barn wall.",
    ],
    "heron": ["The grey heron stands motionless in shallow water before striking at fish."],
    "swift": ["Swifts sleep on the wing and land only to nest under roof tiles."],
    "robin": ["Robins sing through winter to hold a feeding territory in gardens."],
}
LINES = [
    '{"query": "kestrel nest box", "relevant": ["kestrel"]}',
    '{"query": "heron striking at fish", "relevant": ["heron"]}',
    '{"query": "birds that sleep on the wing", "relevant": ["swift"]}',
    '{"query": "winter song", "relevant": ["robin", "swift"], "filter": {"garden": true}}',
]


@pytest.fixture(params=["memory", "pgvector"])
def store(request: pytest.FixtureRequest) -> Iterator[VectorStore]:
    factory: Iterator[StoreFactory] = make_store_factory(request, request.param)
    made = next(factory)(dimensions=64)
    made.embedder = Embeddings.from_settings(SETTINGS)
    yield made
    next(factory, None)


def test_every_mode_over_a_real_collection(store: VectorStore) -> None:
    name = unique_name()
    embedder = Embeddings.from_settings(SETTINGS)
    store.configure_search(name, SearchSettings(keywords=True))  # every mode evaluated: the keyword index kept
    collection = store.get_collection(name, create=True)
    collection.upsert_many(
        [
            VectorRecord(
                f"{rid}:{n}", embedder.embed(text), text, {"record_id": rid, "chunk": n, "garden": rid == "robin"}
            )
            for rid, texts in RECORDS.items()
            for n, text in enumerate(texts)
        ]
    )
    report = evaluate(collection, parse_queries(LINES), k=3)

    assert [m.mode for m in report.modes] == ["vector", "keyword", "hybrid"]
    assert len(report.scores) == 12
    for mode in report.modes:
        assert mode.queries == 4 and 0 < mode.p50_ms <= mode.p95_ms
    keyword = report.mode("keyword")
    # Each query shares rare words with its record alone; the filtered one finds robin (swift is filtered out).
    assert (keyword.recall, keyword.mrr) == (pytest.approx((1 + 1 + 1 + 0.5) / 4), 1.0)
    by_query = {(s.query, s.mode): s for s in report.scores}
    assert by_query["kestrel nest box", "keyword"].ranked[0] == "kestrel"
    assert by_query["kestrel nest box", "keyword"].ranked.count("kestrel") == 1  # two chunks, one record
    assert by_query["winter song", "hybrid"].ranked == ("robin",)
    assert report.mode("hybrid").mrr == 1.0
    store.drop_collection(name)
