"""A fuzzer of record ids from every kind of source, through the real PostgreSQL ledger (issue 48): a Python loader's
ids, a SQL table's, and pushed documents' (sent as a sender other than this producer, which refuses a bad id at
once, would send them). The unit fuzzer (tests/unit/test_fuzz_inputs.py) runs over the memory ledger, which holds any
text and so hid every id PostgreSQL refuses.

Each run over drawn ids must end ``done``; every good id is indexed (its ledger entry and its chunks); every id the
worker refuses (``check_record_id``: a NUL, a lone surrogate, empty, over ``limits.max_id_chars``) fails alone, with
its failures row, kept as the ledger keeps a failed id, whose error quotes the id and names the rule.

Fixed seed (derandomized) and ``VECTORSYNC_FUZZ_ID_EXAMPLES`` examples per source kind (10 here: a few seconds
each); run longer with ``VECTORSYNC_FUZZ_ID_EXAMPLES=500 pytest tests/integration/worker/test_fuzz_ids.py``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store.connect.postgres import engine_url
from store.contract import INDEX_DOCUMENT
from store.errors import ConfigError
from store.state.ledger import RunStatus
from store.state.ledger.postgres import PostgresLedger
from store.state.ledger.rules import kept_record_id
from store.vectors.records import QUOTED_ID_CHARS, check_record_id, has_unstorable
from tests.backends import unique_name
from tests.integration.worker import test_unstorable_ids as loaded
from tests.integration.worker.test_unstorable_ids import PostgresTaskQueue, loader_records, postgres_queue, reindex

EXAMPLES = int(os.environ.get("VECTORSYNC_FUZZ_ID_EXAMPLES", "10"))
FUZZ = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.large_base_example,
        HealthCheck.data_too_large,
    ],
)
#: Ids per batch task: several batches and fan-out pages per run, pages the ledger knows and pages it does not.
BATCH = 3
#: Over 2704 bytes of UTF-8 that do not compress: more than PostgreSQL's btree takes as one key.
INCOMPRESSIBLE = "".join(chr(0x4E00 + (i * 7919) % 20000) for i in range(1500))
#: Ids hostile sources have held.
FIXED = [
    "nul\x00id",
    "\x00",
    "sur\ud800",
    "\udfff",
    "",
    " ",
    "\t\n",
    " padded ",
    "é",
    "e\u0301",
    "x" * 512,
    "x" * 513,
    "🦀" * 600,
    INCOMPRESSIBLE,
]
#: Characters of drawn ids: control characters (NUL among them), lone surrogates, spaces and line separators,
#: letters, digits, punctuation, symbols and combining marks of every script.
CHARS = st.characters(categories=["Cc", "Cs", "Zs", "Zl", "L", "N", "P", "S", "M"])
#: An id: short, around and over limits.max_id_chars (512), or one of ``FIXED``.
AN_ID = st.one_of(st.text(CHARS, max_size=12), st.text(CHARS, min_size=480, max_size=1200), st.sampled_from(FIXED))
IDS = st.lists(AN_ID, min_size=1, max_size=7, unique=True)
#: Ids a PostgreSQL text column holds (a SQL source's): no NUL, no lone surrogate.
HELD_IDS = st.lists(AN_ID.filter(lambda i: not has_unstorable(i)), min_size=1, max_size=7, unique=True)


def refused(record_id: str) -> bool:
    """Whether the worker refuses ``record_id`` (``check_record_id``, at the default limits)."""
    try:
        check_record_id(record_id)
    except ConfigError:
        return True
    return False


def quoted(record_id: str, error: str) -> bool:
    """Whether ``error`` quotes ``record_id`` as repr writes it (escaped), or a long one by its beginning."""
    return any(repr(form) in error for form in (record_id, record_id[:QUOTED_ID_CHARS]))


def assert_indexed_or_failed_alone(queue: PostgresTaskQueue, name: str, ids: Sequence[str]) -> None:
    """Each good id indexed (ledger entry, chunks); each refused id with its failures row, saying why."""
    good, bad = [i for i in ids if not refused(i)], [i for i in ids if refused(i)]
    assert set(queue.ledger.entries(name, good)) == set(good)
    collection = queue.client.get_collection(name)
    assert [i for i in good if not collection.chunks_of(i)] == []
    failures = {f.record_id: f.error for f in queue.ledger.failures(name)}
    assert set(failures) == {kept_record_id(i) for i in bad}, (sorted(failures), bad)
    for record_id in bad:
        error = failures[kept_record_id(record_id)]
        assert quoted(record_id, error) and "limits.max_id_chars" in error, (record_id, error)


def assert_run(queue: PostgresTaskQueue, name: str, ids: Sequence[str]) -> None:
    """A reindex over ``ids`` ends done, each good id counted done and each refused one failed."""
    run = reindex(queue, name)
    bad = sum(1 for i in ids if refused(i))
    assert (run.status, run.done + run.skipped, run.failed) == (RunStatus.DONE, len(ids) - bad, bad), run
    assert_indexed_or_failed_alone(queue, name, ids)


@pytest.fixture(scope="module")
def ledger(postgres_url: str) -> Iterator[PostgresLedger]:
    opened = PostgresLedger(postgres_url)
    yield opened
    opened.close()


@pytest.fixture(scope="module")
def table(postgres_url: str) -> Iterator[tuple[str, sa.Engine]]:
    """A source table keyed by text ids, with no index on them (an index would refuse the longest)."""
    name, engine = unique_name("fuzz_ids"), sa.create_engine(engine_url(postgres_url))
    with engine.begin() as conn:
        conn.execute(sa.text(f'CREATE TABLE "{name}" (id text NOT NULL, body text NOT NULL)'))
    yield name, engine
    with engine.begin() as conn:
        conn.execute(sa.text(f'DROP TABLE "{name}"'))
    engine.dispose()


@FUZZ
@given(ids=IDS)
def test_ids_of_a_python_loader(ledger: PostgresLedger, ids: list[str]) -> None:
    name = unique_name("fuzz_py")
    loader_records(ids)
    collection = {"source": {"kind": "python", "loader": f"{loaded.__name__}:load_records"}}
    with postgres_queue(ledger, {"collections": {name: collection}, "worker": {"batch_size": BATCH}}) as queue:
        assert_run(queue, name, ids)  # a first load
        loader_records([*ids, "added since"])
        assert_run(queue, name, [*ids, "added since"])  # pages the ledger knows, judged against it


@FUZZ
@given(ids=HELD_IDS)
def test_ids_of_a_sql_table(
    ledger: PostgresLedger, table: tuple[str, sa.Engine], postgres_url: str, ids: list[str]
) -> None:
    name, (source_table, engine) = unique_name("fuzz_sql"), table
    with engine.begin() as conn:
        conn.execute(sa.text(f'TRUNCATE "{source_table}"'))
        rows = [{"id": record_id, "body": f"note {n} about renewals"} for n, record_id in enumerate(ids)]
        conn.execute(sa.text(f'INSERT INTO "{source_table}" VALUES (:id, :body)'), rows)
    source = {"kind": "sql", "url": postgres_url, "table": source_table, "text": "{body}"}
    with postgres_queue(ledger, {"collections": {name: {"source": source}}, "worker": {"batch_size": BATCH}}) as queue:
        assert_run(queue, name, ids)


@FUZZ
@given(ids=IDS)
def test_ids_of_pushed_documents(ledger: PostgresLedger, ids: list[str]) -> None:
    name = unique_name("fuzz_push")
    with postgres_queue(ledger, {"collections": {name: {"source": {"kind": "push"}}}}) as queue:
        for n, record_id in enumerate(ids):  # as sent by a sender that does not check ids (this producer refuses)
            queue.send_task(INDEX_DOCUMENT, (name, record_id, f"note {n} about renewals", {}, 1))
        queue.run_queue()
        assert_indexed_or_failed_alone(queue, name, ids)
