"""The relay over a real outbox: coalesced sends (live, bulk, truncate), rows deleted only once sent, a failed
send leaves them for the next claim, two relays share the rows without sending one twice, and a NOTIFY wakes
a waiting relay before its poll."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator, Mapping, Sequence

import psycopg
import pytest

from store.capture import Outbox, Relay, Target
from store.errors import ConfigError
from store.settings import SourceSettings
from tests.backends import unique_name
from tests.workers import wait_for


class Recorder:
    """What a producer would have sent; ``fail`` makes the next sends raise, as a broker that is down does."""

    def __init__(self) -> None:
        self.live: list[tuple[str, str]] = []
        self.bulk: list[tuple[str, list[str]]] = []
        self.reindexed: list[str] = []
        self.failed: list[tuple[str, str, str]] = []
        self.changed_at: dict[str, float] = {}
        self.fail = False
        self.lock = threading.Lock()

    def _check(self) -> None:
        if self.fail:
            raise ConnectionError("broker down")

    def index_records(
        self,
        collection: str,
        record_ids: Sequence[str],
        *,
        coalesce: bool = True,
        changed_at: Mapping[str, float] | None = None,
    ) -> int:
        self._check()
        assert not coalesce  # the relay deletes its rows once sent: a stale mark must not swallow one
        if "" in record_ids:
            raise ConfigError("record id '' is not allowed: use a non-empty string or an integer")
        with self.lock:
            self.live += [(collection, i) for i in record_ids]
            self.changed_at |= changed_at or {}
        return len(record_ids)

    def index_batch(self, collection: str, record_ids: Sequence[str], *, changed_at: float | None = None) -> None:
        self._check()
        with self.lock:
            self.bulk.append((collection, list(record_ids)))
            if changed_at is not None:
                self.changed_at[f"batch {len(self.bulk) - 1}"] = changed_at

    def reindex_all(self, collection: str, *, full: bool = False, allow_empty: bool = False) -> str:
        self._check()
        assert full and allow_empty
        self.reindexed.append(collection)
        return "run-1"

    def record_failure(self, collection: str, record_id: str, error: str) -> None:
        self.failed.append((collection, record_id, error))

    def ids(self) -> list[str]:
        return [i for _, i in self.live] + [i for _, batch in self.bulk for i in batch]


@pytest.fixture
def pg(postgres_url: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        yield conn


@pytest.fixture
def captured(postgres_url: str, pg: psycopg.Connection) -> Iterator[tuple[str, Outbox, Target]]:
    name = unique_name("relayed")
    pg.execute(f"CREATE TABLE {name} (id int PRIMARY KEY, body text)")
    outbox = Outbox(postgres_url)
    target = outbox.target(
        name, SourceSettings(kind="sql", url=postgres_url, table=name, text="{body}", capture="trigger")
    )
    outbox.enable(target)
    yield name, outbox, target
    outbox.disable(target)
    pg.execute(f"DROP TABLE {name}")
    pg.execute("DELETE FROM vectorsync_outbox WHERE collection = %s", (name,))
    outbox.close()


def pending(pg: psycopg.Connection, name: str) -> int:
    row = pg.execute("SELECT count(*) FROM vectorsync_outbox WHERE collection = %s", (name,)).fetchone()
    assert row is not None
    return int(row[0])


def test_a_few_changes_go_live_once_each_a_flood_in_full_batches(
    pg: psycopg.Connection, captured: tuple[str, Outbox, Target]
) -> None:
    name, outbox, _ = captured
    sent = Recorder()
    relay = Relay(outbox, [name], sent, batch_size=100, claim_rows=5000)
    for i in range(3):  # the same record written three times: one task
        pg.execute(f"INSERT INTO {name} VALUES (1, 'a{i}') ON CONFLICT (id) DO UPDATE SET body = excluded.body")
    pg.execute(f"INSERT INTO {name} VALUES (2, 'b')")
    assert relay.drain() == 4
    assert sent.live == [(name, "1"), (name, "2")] and sent.bulk == []
    assert pending(pg, name) == 0

    pg.execute(f"INSERT INTO {name} SELECT g, 'bulk' FROM generate_series(100, 349) g")
    relay.drain()
    assert [len(batch) for _, batch in sent.bulk] == [100, 100, 50]
    assert sorted(map(int, sent.ids())) == [1, 2, *range(100, 350)]


def test_each_change_is_sent_with_when_its_writer_wrote_it_the_oldest_of_a_coalesced_id(
    pg: psycopg.Connection, captured: tuple[str, Outbox, Target]
) -> None:
    name, outbox, _ = captured
    sent = Recorder()
    before = time.time()
    pg.execute(f"INSERT INTO {name} VALUES (1, 'a')")
    time.sleep(0.2)
    between = time.time()
    pg.execute(f"UPDATE {name} SET body = 'a2' WHERE id = 1")
    pg.execute(f"INSERT INTO {name} VALUES (2, 'b')")
    after = time.time()
    Relay(outbox, [name], sent, batch_size=100).drain()
    assert before - 0.05 <= sent.changed_at["1"] <= between  # the insert's time, not the later update's
    assert between <= sent.changed_at["2"] <= after + 0.05

    pg.execute(f"INSERT INTO {name} SELECT g, 'bulk' FROM generate_series(100, 299) g")
    Relay(outbox, [name], sent, batch_size=100).drain()
    assert after - 0.05 <= sent.changed_at["batch 0"] <= sent.changed_at["batch 1"] <= time.time()


def test_a_truncate_becomes_one_full_reindex_and_the_claims_ids_go_too(
    pg: psycopg.Connection, captured: tuple[str, Outbox, Target]
) -> None:
    name, outbox, _ = captured
    sent = Recorder()
    pg.execute(f"INSERT INTO {name} VALUES (1, 'a'), (2, 'b')")
    pg.execute(f"TRUNCATE {name}")
    pg.execute(f"INSERT INTO {name} VALUES (3, 'c')")
    Relay(outbox, [name], sent).drain()
    # The reindex trusts updated_at: the ids are indexed on their own (a reloaded row may keep its stamp).
    assert sent.reindexed == [name] and sorted(sent.ids()) == ["1", "2", "3"]
    assert pending(pg, name) == 0


def test_a_failed_send_keeps_every_row_of_the_claim_for_the_next(
    pg: psycopg.Connection, captured: tuple[str, Outbox, Target]
) -> None:
    name, outbox, _ = captured
    sent = Recorder()
    relay = Relay(outbox, [name], sent)
    pg.execute(f"INSERT INTO {name} SELECT g, 'x' FROM generate_series(1, 10) g")
    sent.fail = True
    with pytest.raises(ConnectionError):
        relay.drain()
    assert pending(pg, name) == 10
    sent.fail = False
    assert relay.drain() == 10 and pending(pg, name) == 0


def test_claims_are_disjoint_so_two_relays_never_send_a_row_twice(
    pg: psycopg.Connection, captured: tuple[str, Outbox, Target]
) -> None:
    name, outbox, _ = captured
    sent = Recorder()
    pg.execute(f"INSERT INTO {name} SELECT g, 'x' FROM generate_series(1, 3000) g")
    relays = [Relay(Outbox(outbox.url), [name], sent, claim_rows=50, batch_size=10_000) for _ in range(2)]
    threads = [threading.Thread(target=relay.drain) for relay in relays]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    for relay in relays:
        relay.close()
    assert sorted(map(int, sent.ids())) == list(range(1, 3001))  # each id once
    assert pending(pg, name) == 0


def test_a_notify_wakes_the_relay_long_before_its_poll(
    pg: psycopg.Connection, captured: tuple[str, Outbox, Target]
) -> None:
    name, outbox, target = captured
    outbox.enable(dataclasses.replace(target, notify=True))  # NOTIFY is opt-in (source.capture_notify)
    sent = Recorder()
    relay = Relay(outbox, [name], sent, poll_seconds=60)
    stop = threading.Event()
    thread = threading.Thread(target=relay.run, args=(stop,), daemon=True)
    thread.start()
    try:
        time.sleep(0.5)  # the relay drained the empty outbox and waits for a notification or its 60 s poll
        start = time.monotonic()
        pg.execute(f"INSERT INTO {name} VALUES (7, 'wake up')")
        wait_for(lambda: sent.live, timeout=10, what="the relay to send the change")
        assert time.monotonic() - start < 5
    finally:
        stop.set()
        thread.join(10)
    assert not thread.is_alive()


def test_an_id_refused_before_sending_fails_alone_and_the_outbox_drains(
    postgres_url: str, pg: psycopg.Connection
) -> None:
    name = unique_name("textids")
    pg.execute(f"CREATE TABLE {name} (code text PRIMARY KEY, body text)")
    outbox = Outbox(postgres_url)
    target = outbox.target(
        name, SourceSettings(kind="sql", url=postgres_url, table=name, id="code", text="{body}", capture="trigger")
    )
    outbox.enable(target)
    try:
        pg.execute(f"INSERT INTO {name} VALUES ('a', 'x'), ('', 'an empty key'), ('b', 'y')")
        sent = Recorder()
        assert Relay(outbox, [name], sent).drain() == 3
        assert sorted(sent.ids()) == ["a", "b"]
        assert [(c, r) for c, r, _ in sent.failed] == [(name, "")] and "non-empty" in sent.failed[0][2]
        assert pending(pg, name) == 0
    finally:
        outbox.disable(target)
        pg.execute(f"DROP TABLE {name}")
        pg.execute("DELETE FROM vectorsync_outbox WHERE collection = %s", (name,))
        outbox.close()
