"""A deleted row's text leaves no trace in pgvector's keyword tables (issue 48, erasure): its terms leave the
statistics once no row holds them, and its postings leave the segments at the write that deletes it, not at a
later merge; a recount reports only terms whose counts were wrong (issue 48, defect 9c)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator

import pytest
import sqlalchemy as sa

from store import Collection, Filter, VectorRecord
from store.vectors.pgvector import PgvectorStore, postings_cache, segments
from tests.backends import unique_name
from tests.unit.store.vectors.test_keyword_conformance import DIMENSIONS, KEYWORDS_ON, corpus

#: Words only the secret record holds (their terms: "zanzibar", "quixot", "marmalad").
SECRET = "zanzibar quixotic marmalade"
#: The paths that take the secret record's text away, each given the collection and the secret record.
Erase = Callable[[Collection, VectorRecord], None]
ERASERS: dict[str, Erase] = {
    "delete": lambda c, r: c.delete(r.id),
    "delete_where": lambda c, r: c.delete_where(Filter.eq("record_id", r.id)),
    "replace_where": lambda c, r: c.replace_where(Filter.eq("record_id", r.id), [_plain(r)]),
    "replace_records": lambda c, r: c.replace_records([r.id], [_plain(r)]),
    "upsert": lambda c, r: c.upsert(_plain(r)),
}


@pytest.fixture
def pg(postgres_url: str) -> Iterator[PgvectorStore]:
    store = PgvectorStore(postgres_url, dimensions=DIMENSIONS)
    yield store
    for name in store.list_collections():
        if name.startswith("c_"):
            store.drop_collection(name)
    store.close()


@pytest.fixture
def small_classes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Size classes of 4, 16, 64 rows: a few batches cross several classes and merges."""
    monkeypatch.setattr(segments, "BASE_DOCS", 4)


def keyword_collection(store: PgvectorStore) -> Collection:
    name = unique_name()
    store.configure_search(name, KEYWORDS_ON)
    collection = store.get_collection(name, create=True)
    assert collection.keyword_analyzer is not None
    return collection


def _owned(record: VectorRecord, text: str | None = None) -> VectorRecord:
    return VectorRecord(record.id, record.embedding, text or record.text, {**record.metadata, "record_id": record.id})


def _plain(record: VectorRecord) -> VectorRecord:
    """The secret record with its secret words taken out."""
    return _owned(record, record.text.replace(SECRET, "").strip())


def secret_terms(collection: Collection) -> list[str]:
    analyzer = collection.keyword_analyzer
    assert analyzer is not None
    return sorted(analyzer.frequencies(SECRET))


def stored_postings(store: PgvectorStore, collection: Collection) -> Counter[tuple[str, int, int, int]]:
    """Every posting the segments hold: (term, kwdoc, tf, row length)."""
    _, postings = segments.posting_tables(collection.table)  # type: ignore[attr-defined]
    found: Counter[tuple[str, int, int, int]] = Counter()
    with store.transaction() as conn:
        for term, count, docs, tfs, lengths in conn.execute(
            sa.select(postings.c.term, postings.c.count, postings.c.docs, postings.c.tfs, postings.c.lengths)
        ):
            unpacked = (segments.unpack(bytes(part), count) for part in (docs, tfs, lengths))
            found.update((term, int(d), int(t), int(n)) for d, t, n in zip(*unpacked, strict=True))
    return found


def live_postings(store: PgvectorStore, collection: Collection) -> Counter[tuple[str, int, int, int]]:
    """The postings the rows in the table stand for."""
    table = collection.table  # type: ignore[attr-defined]
    query = sa.select(table.c.kwdoc, table.c.keywords, table.c.keyword_length).where(table.c.keyword_length > 0)
    with store.transaction() as conn:
        return Counter(
            (term, row.kwdoc, tf, row.keyword_length)
            for row in conn.execute(query)
            for term, tf in row.keywords.items()
        )


def stats_terms(store: PgvectorStore, collection: Collection, *, zero: bool = False) -> set[str]:
    """The terms the statistics table holds; with ``zero``, those whose shards sum to nothing."""
    name = f"{collection.table.name}_kwstats"  # type: ignore[attr-defined]
    having = " HAVING sum(docs) = 0 AND sum(tokens) = 0" if zero else ""
    with store.transaction() as conn:
        return set(conn.execute(sa.text(f'SELECT term FROM "{name}" GROUP BY term{having}')).scalars())


def _written(store: PgvectorStore, *, secret_first: bool) -> tuple[Collection, VectorRecord]:
    """A collection of 40 records written in batches of 5 (segments, merges), the secret one among them: in the
    first batch (merged since) or the last (its own new segment)."""
    collection, records = keyword_collection(store), [_owned(r) for r in corpus(40)]
    secret = _owned(records[0], f"{records[0].text} {SECRET}")
    ordered = [secret, *records[1:]] if secret_first else [*records[1:], secret]
    for start in range(0, len(ordered), 5):
        collection.upsert_many(ordered[start : start + 5])
    assert set(secret_terms(collection)) <= stats_terms(store, collection)
    return collection, secret


@pytest.mark.usefixtures("small_classes")
@pytest.mark.parametrize("secret_first", [True, False], ids=["merged", "fresh"])
@pytest.mark.parametrize("path", sorted(ERASERS))
def test_a_removed_text_leaves_no_term_or_posting_behind(pg: PgvectorStore, path: str, secret_first: bool) -> None:
    collection, secret = _written(pg, secret_first=secret_first)
    ERASERS[path](collection, secret)
    assert stats_terms(pg, collection) & set(secret_terms(collection)) == set()
    assert stats_terms(pg, collection, zero=True) == set()
    assert stored_postings(pg, collection) == live_postings(pg, collection)
    assert collection.keyword_drift() == 0
    assert collection.search(SECRET, mode="keyword") == []


@pytest.mark.usefixtures("small_classes")
@pytest.mark.parametrize("elsewhere", [False, True], ids=["here", "elsewhere"])
def test_a_search_forgets_the_decoded_postings_of_a_deleted_row(
    pg: PgvectorStore, monkeypatch: pytest.MonkeyPatch, elsewhere: bool
) -> None:
    """This process's decoded postings (``postings_cache``) hold no posting of a row deleted since they were read:
    deleted here (the purge forgets them), or elsewhere (a process whose cache the purge cannot reach: the next
    search finds the postings' count changed and reads them again)."""
    collection, secret = _written(pg, secret_first=True)
    if elsewhere:
        monkeypatch.setattr(postings_cache.PostingsCache, "discard", lambda *_: None)
    assert collection.search(f"merge {SECRET}", mode="keyword", limit=50)[0].id == secret.id
    table = collection.table  # type: ignore[attr-defined]
    with pg.transaction() as conn:
        kwdoc = conn.execute(sa.select(table.c.kwdoc).where(table.c.id == secret.id)).scalar_one()
    collection.delete(secret.id)
    assert secret.id not in [m.id for m in collection.search(f"merge {SECRET}", mode="keyword", limit=50)]
    cache = postings_cache.shared()
    for term in ["merg", *secret_terms(collection)]:
        for seg in cache.held(table.name, term):
            held = cache.get(table.name, term, seg)
            assert held is None or kwdoc not in held.docs.tolist()


def test_a_recount_reports_no_repair_of_terms_no_row_holds(pg: PgvectorStore) -> None:
    """A term whose shards sum to nothing was counted right: removing its rows is no repair (defect 9c)."""
    collection = keyword_collection(pg)
    collection.upsert_many([_owned(r) for r in corpus(30)])
    name = f"{collection.table.name}_kwstats"  # type: ignore[attr-defined]
    with pg.transaction() as conn:
        conn.execute(
            sa.text(
                f'INSERT INTO "{name}" (term, shard, docs, tokens) VALUES '
                "('ghost', 1, 2, 0), ('ghost', 2, -2, 0), ('nought', 3, 0, 0)"
            )
        )
    assert collection.keyword_drift() == 0
    assert collection.recount_keywords() == 0
    assert stats_terms(pg, collection) & {"ghost", "nought"} == set()
    with pg.transaction() as conn:
        conn.execute(sa.text(f"UPDATE \"{name}\" SET docs = docs + 7 WHERE term = 'merg'"))
        conn.execute(sa.text(f"INSERT INTO \"{name}\" (term, shard, docs, tokens) VALUES ('ghost', 1, 0, 0)"))
    assert collection.recount_keywords() == 1  # "merg" was wrong; "ghost" only held nothing
