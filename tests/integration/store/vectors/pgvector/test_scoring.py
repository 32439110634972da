"""A keyword search over pgvector's segments: the best rows handed over to the SQL path when a filter keeps too
few of them, and never scored from the postings a process decoded for a table of the same name before."""

from __future__ import annotations

import pytest

from store import Filter
from store.vectors.pgvector import PgvectorStore, scoring
from store.vectors.pgvector.table import PgvectorCollection
from tests.backends import unique_name
from tests.integration.store.vectors.pgvector.test_segments import assert_ranks_as_sql, grouped, pg
from tests.unit.store.vectors.test_keyword_conformance import corpus

__all__ = ["pg"]  # the fixture, shared with test_segments.py


def test_a_filter_keeping_few_of_the_best_rows_hands_over_to_the_sql_path(
    pg: PgvectorStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    collection = pg.get_collection(unique_name(), create=True)
    assert isinstance(collection, PgvectorCollection)
    collection.upsert_many(grouped(corpus(400)))
    monkeypatch.setattr(scoring, "MAX_CANDIDATES", 40)
    with pg.transaction() as conn:
        terms = collection.analyzer.query_terms("merge conflict")
        assert (
            scoring.best(conn, collection.table, terms, where=collection._where(Filter.eq("group", 6)), limit=25)
            is None
        )
    assert_ranks_as_sql(pg, collection)


def test_a_collection_made_again_under_its_name_is_never_scored_from_the_old_postings(pg: PgvectorStore) -> None:
    name = unique_name()
    first = pg.get_collection(name, create=True)
    first.upsert_many(grouped(corpus(200, seed=31)))
    first.search("merge conflict", limit=5, mode="keyword")  # its postings decoded in this process
    pg.drop_collection(name)
    again = pg.get_collection(name, create=True)
    assert isinstance(again, PgvectorCollection)
    again.upsert_many(grouped(corpus(200, seed=32)))
    assert_ranks_as_sql(pg, again)
