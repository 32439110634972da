"""Gathering the facts over a Client of memory parts, with a source reader of the test's own: what each part
says goes where, bad input is refused naming the fix, and what a part cannot tell is noted."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from producer.testing import memory_settings
from store.client import Client
from store.errors import ConfigError, VectorsyncError
from store.explain import SourceFacts, State
from store.state.ledger import LedgerEntry
from store.vectors.records import VectorRecord


class Reader:
    """Answers each read with ``answer`` and remembers what it was asked."""

    def __init__(self, answer: SourceFacts) -> None:
        self.answer = answer
        self.asked: list[tuple[str, str]] = []

    def read(self, collection: str, record_id: str) -> SourceFacts:
        self.asked.append((collection, record_id))
        return self.answer


@pytest.fixture
def client() -> Iterator[Client]:
    settings = memory_settings(
        {
            "vectors": {"dimensions": 4},
            "collections": {
                "notes": {"source": {"kind": "python", "loader": "x:y"}},
                "docs": {"source": {"kind": "push"}},
            },
        }
    )
    with Client(settings) as client:
        yield client


def index(client: Client, collection: str, record_id: str, chunks: int, digest: str = "h1") -> None:
    client.get_collection(collection).replace_records(
        [record_id],
        [
            VectorRecord(f"{record_id}:{i}", [1, 0, 0, i], f"text {i}", {"record_id": record_id, "chunk": i}, "m")
            for i in range(chunks)
        ],
    )
    with client.ledger.locked(collection, [record_id]) as held:
        held.record_indexed([LedgerEntry(record_id, digest, "m", chunks)])


def test_each_part_lands_in_its_fact(client: Client) -> None:
    index(client, "notes", "7", 2)
    client.ledger.record_failure("notes", "7", "boom")
    reader = Reader(SourceFacts("python", True, text="text", hash="h1"))
    facts = client.explain("notes", 7, source=reader)
    assert reader.asked == [("notes", "7")]
    assert (facts.collection, facts.record_id, facts.generation, facts.backend) == ("notes", "7", "notes", "memory")
    assert facts.place == "the memory collection notes"
    assert facts.entry is not None and facts.entry.chunks == 2 and facts.entry.indexed_at is not None
    assert [c.id for c in facts.chunks] == ["7:0", "7:1"]
    assert facts.failure is not None and facts.failure.error == "boom"
    assert (facts.outbox_rows, facts.queued) == (None, None)  # no capture; coalescing off in memory settings
    assert facts.verdict.state == State.FAILED


def test_what_the_parts_cannot_tell_is_noted(client: Client) -> None:
    facts = client.explain("notes", "7", source=Reader(SourceFacts("python", True, hash="h")))
    assert "the memory store keeps no write time of a chunk" in facts.notes
    assert "the ledger records when a record was written, not which run or task wrote it" in facts.notes
    assert any(note.startswith("queued mark: cannot tell") for note in facts.notes)


def test_without_a_reader_the_source_is_not_read_and_the_verdict_says_so(client: Client) -> None:
    index(client, "notes", "7", 1)
    facts = client.explain("notes", "7")
    assert facts.source.found is None
    assert facts.verdict.line == "unknown: the source was not read (no source reader was given)"


def test_a_pushed_collection_is_never_read(client: Client) -> None:
    index(client, "docs", "d1", 1)
    reader = Reader(SourceFacts("push", True))
    facts = client.explain("docs", "d1", source=reader)
    assert reader.asked == [] and facts.verdict.state == State.INDEXED


def test_an_unknown_collection_is_refused_naming_the_configured_ones(client: Client) -> None:
    with pytest.raises(ConfigError) as error:
        client.explain("nots", "7")
    assert str(error.value) == (
        "collection 'nots' is not configured (configured: docs, notes): check the name, or add "
        "[collections.nots] to the settings"
    )
    assert isinstance(error.value, VectorsyncError)


def test_a_record_id_no_store_could_hold_is_refused(client: Client) -> None:
    with pytest.raises(ConfigError, match=r"record id '' is not allowed"):
        client.explain("notes", "")
