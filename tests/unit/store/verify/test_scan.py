"""``verify`` over a Client of memory parts, with a chunk reader of the test's own: the pages, the sample, the
confirmation under the records' locks, and bad input refused naming the fix."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest

import store.verify.scan as scan
from producer.testing import memory_settings
from store.client import Client
from store.errors import ConfigError
from store.state.ledger import LedgerEntry
from store.vectors.records import VectorRecord, text_digest
from store.verify import Expected, Kind


class Reader:
    """Says each record makes ``text N`` chunks, with content hash ``h1``."""

    def __init__(self) -> None:
        self.asked: list[list[str]] = []

    def expected(self, collection: str, record_ids: Sequence[str]) -> dict[str, Expected]:
        self.asked.append(list(record_ids))
        return {i: Expected(True, "h1", tuple(text_digest(f"text {n}") for n in range(2))) for i in record_ids}


@pytest.fixture
def client() -> Iterator[Client]:
    settings = memory_settings(
        {"vectors": {"dimensions": 4}, "collections": {"notes": {"source": {"kind": "python", "loader": "x:y"}}}}
    )
    with Client(settings) as client:
        yield client


def index(client: Client, record_id: str, chunks: int = 2) -> None:
    client.get_collection("notes").replace_records(
        [record_id],
        [
            VectorRecord(f"{record_id}:{i}", [1, 0, 0, i], f"text {i}", {"record_id": record_id, "chunk": i}, "m")
            for i in range(chunks)
        ],
    )
    with client.ledger.locked("notes", [record_id]) as held:
        held.record_indexed([LedgerEntry(record_id, "h1", "m", chunks)])


def test_pages_of_records_each_read_once_from_the_source(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scan, "PAGE", 3)
    for i in range(7):
        index(client, f"r{i}")
    reader = Reader()
    report = client.verify("notes", source=reader)
    assert (report.clean, report.records, report.chunks) == (True, 7, 14)
    assert [len(page) for page in reader.asked] == [3, 3, 1]
    assert (report.generation, report.backend) == ("notes", "memory")


def test_a_text_the_source_does_not_make_is_drift(client: Client) -> None:
    index(client, "r1")
    client.get_collection("notes").upsert(
        VectorRecord("r1:1", [1, 0, 0, 1], "changed", {"record_id": "r1", "chunk": 1}, "m")
    )
    report = client.verify("notes", source=Reader())
    assert [(d.record_id, d.kinds) for d in report.first] == [("r1", (Kind.TEXT,))]
    unread = client.verify("notes")
    assert unread.clean and unread.notes == ["chunk texts were not compared with the source (no source reader)"]


def test_only_the_first_drifted_records_are_kept_to_show(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scan, "SHOWN", 2)
    for i in range(4):
        index(client, f"r{i}")
        client.get_collection("notes").replace_records([f"r{i}"], [])
    report = client.verify("notes")
    assert (report.drifted, len(report.first), report.kinds) == (4, 2, {Kind.MISSING: 4})


def test_a_sample_draws_that_many_records(client: Client) -> None:
    for i in range(10):
        index(client, f"r{i}")
    assert client.verify("notes", sample=4).records == 4


def test_bad_input_is_refused_naming_the_fix(client: Client) -> None:
    with pytest.raises(ConfigError, match="collection 'nosuch' is not configured"):
        client.verify("nosuch")
    with pytest.raises(ConfigError, match="--sample must be a positive number of records, got 0"):
        client.verify("notes", sample=0)
    with pytest.raises(ConfigError, match="repair works on a collection's name, not a generation's"):
        client.verify("notes__g2", repair=True)
