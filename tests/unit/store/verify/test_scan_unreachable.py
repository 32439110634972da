"""``verify`` when a part it needs cannot be reached, over a Client of memory parts and a sender of the test's own
in the broker's place: a repair whose send fails keeps every record it did not send (the ledger entries of the
drifted ones come back, unless a task of their own wrote one since), and a source that cannot be opened stops
verify before anything is sent. (The same through the command, on a broker and a source at a closed port:
tests/integration/producer/cli/test_verify_unreachable.py.)"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from kombu.exceptions import OperationalError

from producer.testing import memory_settings
from store.client import Client
from store.errors import BrokerUnavailable, StoreUnavailable
from store.state.ledger import LedgerEntry
from store.vectors.records import VectorRecord
from store.verify import Expected

IDS = [f"r{i}" for i in range(5)]


class Broker:
    """Takes the first ``takes`` sends, then refuses each as kombu does when the broker is down; ``before`` runs
    first on the refused send (a worker's task writing meanwhile, say)."""

    def __init__(self, takes: int, before: Any = None) -> None:
        self.takes, self.before = takes, before
        self.sent: list[list[str]] = []

    def __call__(self, name: str, *, args: tuple[Any, ...], **options: Any) -> None:
        if len(self.sent) >= self.takes:
            if self.before is not None:
                self.before()
            raise OperationalError("Error 111 connecting to 127.0.0.1:1. Connection refused.")
        self.sent.append(list(args[1]))


class Unreachable:
    """A chunk reader whose source cannot be opened."""

    def expected(self, collection: str, record_ids: Sequence[str]) -> dict[str, Expected]:
        raise StoreUnavailable("source database postgresql://db/crm failed: connection refused")


@pytest.fixture
def client() -> Iterator[Client]:
    settings = memory_settings(
        {
            "vectors": {"dimensions": 4},
            "worker": {"batch_size": 2},
            "collections": {"notes": {"source": {"kind": "python", "loader": "x:y"}}},
        }
    )
    with Client(settings) as client:
        yield client


def entry(record_id: str, content_hash: str = "h1") -> LedgerEntry:
    return LedgerEntry(record_id, content_hash, "m", 2)


def drifted(client: Client) -> None:
    """Each of ``IDS`` in the ledger with 2 chunks, none of them stored (``missing``)."""
    with client.ledger.locked("notes", IDS) as held:
        held.record_indexed([entry(i) for i in IDS])


def test_records_the_broker_does_not_take_keep_their_entries_and_the_error_says_nothing_was_lost(
    client: Client,
) -> None:
    drifted(client)
    broker = Broker(takes=1)
    client.producer.send = broker
    with pytest.raises(BrokerUnavailable) as raised:
        client.verify("notes", repair=True)
    assert broker.sent == [["r0", "r1"]]  # the first batch was taken
    assert sorted(client.ledger.entries("notes", IDS)) == ["r2", "r3", "r4"]  # the rest kept
    assert str(raised.value) == (
        "the broker did not take a repair's index_batch task (OperationalError: Error 111 connecting to "
        "127.0.0.1:1. Connection refused.): 3 drifted records of 'notes' were not sent and their ledger entries "
        "are back as they were, so nothing was lost: run `vectorsync verify notes --repair` again once the "
        "broker answers (broker.url)"
    )
    again = client.verify("notes")
    assert sorted(d.record_id for d in again.first) == ["r2", "r3", "r4"]


def test_a_record_indexed_by_its_own_task_meanwhile_keeps_that_entry(client: Client) -> None:
    drifted(client)

    def indexed_meanwhile() -> None:
        with client.ledger.locked("notes", ["r4"]) as held:
            held.record_indexed([entry("r4", "h2")])

    client.producer.send = Broker(takes=0, before=indexed_meanwhile)
    with pytest.raises(BrokerUnavailable):
        client.verify("notes", repair=True)
    kept = client.ledger.entries("notes", IDS)
    assert kept == {i: entry(i) for i in IDS[:4]} | {"r4": entry("r4", "h2")}


def test_orphans_the_broker_does_not_take_are_left_as_they_were(client: Client) -> None:
    client.get_collection("notes").upsert(
        VectorRecord("o1:0", [1, 0, 0, 0], "text", {"record_id": "o1", "chunk": 0}, "m")
    )
    client.producer.send = Broker(takes=0)
    with pytest.raises(BrokerUnavailable, match=r"1 orphans' record ids of 'notes' were not sent; their chunks are"):
        client.verify("notes", repair=True)
    assert client.verify("notes").orphan_records == 1


def test_a_source_that_cannot_be_opened_stops_verify_before_anything_is_sent(client: Client) -> None:
    drifted(client)
    client.get_collection("notes").upsert(
        VectorRecord("o1:0", [1, 0, 0, 0], "text", {"record_id": "o1", "chunk": 0}, "m")
    )
    broker = Broker(takes=100)
    client.producer.send = broker
    with pytest.raises(StoreUnavailable) as raised:
        client.verify("notes", source=Unreachable(), repair=True)
    assert (broker.sent, sorted(client.ledger.entries("notes", IDS))) == ([], IDS)
    assert str(raised.value) == (
        "source database postgresql://db/crm failed: connection refused; verify stopped before comparing or "
        "sending anything, so nothing was sent or changed: run `vectorsync verify notes --repair` again once the "
        "source answers (collections.notes.source)"
    )
