"""pgvector's write paths (ids locked first, each row replacing its id's) keep the keyword statistics equal to a
recount whatever writes overlap (issue 48, defect 3).

The first three tests make one overlap happen every time: a transaction of the test's own holds a share lock
on rows, the writers queue behind it in a known order (the test waits until PostgreSQL shows them waiting),
then it lets go. The last one lets every write path run at once, round after round, in every order."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
import sqlalchemy as sa

from store import Collection, Filter, VectorRecord
from store.vectors.pgvector import PgvectorStore
from tests.backends import unique_name
from tests.unit.store.vectors.test_keyword_conformance import DIMENSIONS, KEYWORDS_ON, corpus

#: How long a writer may take to reach the lock the test expects it to wait on.
WAIT_SECONDS = 30
ROUNDS = 30

Write = Callable[[], None]


@pytest.fixture
def pg(postgres_url: str) -> Iterator[PgvectorStore]:
    store = PgvectorStore(postgres_url, dimensions=DIMENSIONS)
    yield store
    for name in store.list_collections():
        if name.startswith("c_"):
            store.drop_collection(name)
    store.close()


def keyword_collection(store: PgvectorStore) -> Collection:
    """A new collection that keeps the keyword index."""
    name = unique_name()
    store.configure_search(name, KEYWORDS_ON)
    collection = store.get_collection(name, create=True)
    assert collection.keyword_analyzer is not None
    return collection


def _owned(records: list[VectorRecord], edit: str = "", **metadata: str) -> list[VectorRecord]:
    """``records`` as their own records (``record_id`` = id) with ``metadata``, their text with ``edit`` added."""
    return [
        VectorRecord(r.id, r.embedding, f"{r.text} {edit}".strip(), {**r.metadata, "record_id": r.id, **metadata})
        for r in records
    ]


class Writers:
    """Writes run in threads of their own; the first error any of them meets is raised by ``join``."""

    def __init__(self) -> None:
        self.threads: list[threading.Thread] = []
        self.errors: list[BaseException] = []

    def start(self, write: Write) -> None:
        def run() -> None:
            try:
                write()
            except BaseException as exc:  # raised by join
                self.errors.append(exc)

        thread = threading.Thread(target=run)
        thread.start()
        self.threads.append(thread)

    def join(self) -> None:
        for thread in self.threads:
            thread.join()
        if self.errors:
            raise self.errors[0]


@contextmanager
def share_locked(store: PgvectorStore, collection: Collection, ids: list[str]) -> Iterator[None]:
    """Hold a share lock on the rows ``ids`` until the block ends: a DELETE or a FOR UPDATE of them waits."""
    table = collection.table  # type: ignore[attr-defined]
    with store.engine.connect() as conn, conn.begin():
        conn.execute(sa.select(table.c.id).where(table.c.id.in_(ids)).with_for_update(read=True))
        yield


def wait_for_waiters(store: PgvectorStore, count: int) -> None:
    """Return once ``count`` sessions of this database wait on a lock (a row's or an advisory one)."""
    query = sa.text(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
    )
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        with store.transaction() as conn:
            if conn.execute(query).scalar_one() >= count:
                return
        time.sleep(0.01)  # a poll of PostgreSQL's own view, not a guess at a writer's timing
    raise AssertionError(f"{count} writers never waited on a lock within {WAIT_SECONDS} s")


def _agrees(collection: Collection, rows: int | None = None) -> None:
    """The rows (``rows`` of them, when given) and the statistics agree with a recount."""
    if rows is not None:
        assert collection.count() == rows
    assert collection.keyword_drift() == 0
    assert collection.recount_keywords() == 0


def test_a_swap_racing_an_upsert_of_the_same_ids_keeps_exact_statistics(pg: PgvectorStore) -> None:
    """Left N=4 for 3 rows after 30 rounds: the upsert's FOR UPDATE found its rows deleted by the swap and
    counted nothing out, then its UPDATE met the rows the swap wrote again and counted them in."""
    collection, records = keyword_collection(pg), corpus(3)
    ids = [r.id for r in records]
    collection.upsert_many(_owned(records))
    writers = Writers()
    with share_locked(pg, collection, ids):
        writers.start(lambda: collection.replace_where(Filter.any_of("record_id", ids), _owned(records, "rebase")))
        wait_for_waiters(pg, 1)  # the swap's DELETE, first in the rows' queue
        writers.start(lambda: collection.upsert_many(_owned(records, "merge conflict")))
        wait_for_waiters(pg, 2)  # the upsert, behind it
    writers.join()
    _agrees(collection, 3)


def test_two_swaps_of_overlapping_id_sets_keep_exact_statistics(pg: PgvectorStore) -> None:
    """Left 13 documents counted for 10 rows: each swap locked its own filter, so they never waited for each
    other, and the second one's update met rows the first had deleted and written again."""
    collection, records = keyword_collection(pg), corpus(10)
    first, second = records[:7], records[3:]
    collection.upsert_many(_owned(first, by="first") + _owned(records[7:], by="second"))
    writers = Writers()
    with share_locked(pg, collection, [r.id for r in records[3:7]]):  # the rows both swaps write
        writers.start(lambda: collection.replace_where(Filter.eq("by", "first"), _owned(first, "stash", by="first")))
        wait_for_waiters(pg, 1)
        writers.start(
            lambda: collection.replace_where(Filter.eq("by", "second"), _owned(second, "cherry pick", by="second"))
        )
        wait_for_waiters(pg, 2)
    writers.join()
    _agrees(collection, 10)


def test_the_pipelines_swap_racing_an_upsert_of_its_records_rows_keeps_exact_statistics(pg: PgvectorStore) -> None:
    """The swap counted its copied rows by their records: a row of one of them that another writer committed
    after the swap's DELETE had begun was counted in a second time."""
    collection, records = keyword_collection(pg), corpus(4)
    owners = [r.id for r in records]

    def chunks(part: int, words: str) -> list[VectorRecord]:
        return [
            VectorRecord(f"{r.id}:{part}", r.embedding, f"{r.text} {words}", {"record_id": r.id, "chunk": part})
            for r in records
        ]

    collection.replace_records(owners, chunks(0, "fetch"))
    writers = Writers()
    with share_locked(pg, collection, [f"{owners[0]}:0"]):
        writers.start(lambda: collection.replace_records(owners, chunks(0, "push")))
        wait_for_waiters(pg, 1)  # the swap's DELETE began, and waits
        collection.upsert_many(chunks(1, "tag blame"))  # committed before the swap counts its rows
    writers.join()
    _agrees(collection)


def test_every_write_path_at_once_keeps_exact_statistics(pg: PgvectorStore) -> None:
    """Upserts, swaps, the pipeline's swaps and deletes of overlapping ids, each in a thread, ``ROUNDS`` times."""
    collection, records = keyword_collection(pg), corpus(8)
    ids = [r.id for r in records]
    collection.upsert_many(_owned(records))
    start = threading.Barrier(5)

    def rounds(write: Callable[[int], None]) -> Write:
        def run() -> None:
            start.wait()
            for round in range(ROUNDS):
                write(round)

        return run

    writers = Writers()
    writers.start(rounds(lambda n: collection.upsert_many(_owned(records[:6], f"merge {n}"))))
    writers.start(rounds(lambda n: collection.replace_where(Filter.any_of("record_id", ids[2:]), _owned(records[2:]))))
    writers.start(rounds(lambda n: collection.replace_records(ids[4:], _owned(records[4:], f"rebase {n}"))))
    writers.start(rounds(lambda n: collection.delete(ids[n % 8])))
    writers.start(rounds(lambda n: collection.delete_where(Filter.eq("record_id", ids[(n * 3) % 8]))))
    writers.join()
    _agrees(collection)


def test_an_upsert_meeting_a_row_inserted_outside_its_locks_replaces_it(pg: PgvectorStore) -> None:
    """A row some other program inserts (no id lock, no counting: no terms) between the upsert's DELETE and its
    INSERT is deleted and the upsert's row inserted again: the upsert's row stands, counted once."""
    collection, records = keyword_collection(pg), _owned(corpus(2))
    table = collection.table  # type: ignore[attr-defined]
    outside = sa.insert(table).values(id=records[0].id, embedding=[1.0] * DIMENSIONS, text="", text_hash=b"\0")
    writers = Writers()
    with pg.engine.connect() as conn, conn.begin():
        conn.execute(outside)  # not committed: the upsert's INSERT waits for it
        writers.start(lambda: collection.upsert_many(records))
        wait_for_waiters(pg, 1)
    writers.join()
    assert {c.text for r in records for c in collection.chunks_of(r.metadata["record_id"])} == {r.text for r in records}
    _agrees(collection, 2)
