"""``store.forgetting.forget``: a pushed document is erased with a tombstone newer than a push still in flight,
so that push, delivered after the erasure, stays dropped; the receipt counts what each place held."""

from __future__ import annotations

import pytest

from producer import index_document, testing
from store import ConfigError
from store.erasure.receipt import forget

SETTINGS = {"vectors": {"dimensions": 8}, "collections": {"notes": {"source": {"kind": "push"}}}}


def test_a_pushed_document_is_erased_and_a_push_in_flight_stays_dropped() -> None:
    with testing.queue(SETTINGS) as tasks:
        index_document("notes", "d1", "the vault code is 4471")
        index_document("notes", "d2", "plain note")
        tasks.run_queue()
        index_document("notes", "d1", "the vault code is 4471, again")  # sent, not yet indexed
        receipt = forget(tasks.client, "notes", ["d1"])
        places = {p.place: (p.held, p.removed) for p in receipt.places}
        assert places["chunks in notes, with their keyword statistics and postings"] == (1, 1)
        assert places["ledger entries of notes"] == (1, 1)
        tasks.run_queue()  # the push in flight arrives after the erasure
        notes = tasks.client.store.get_collection("notes")
        assert notes.total() == 1
        [tombstone] = tasks.client.ledger.entries("notes", ["d1"]).values()
        assert (tombstone.content_hash, tombstone.model, tombstone.chunks) == ("", "", 0)  # no trace of the text


def test_forget_refuses_an_unknown_collection_and_a_bad_id_before_anything_goes() -> None:
    with testing.queue(SETTINGS) as tasks:
        index_document("notes", "d1", "kept")
        tasks.run_queue()
        with pytest.raises(ConfigError, match="not configured"):
            forget(tasks.client, "other", ["d1"])
        with pytest.raises(ConfigError, match="record id"):
            forget(tasks.client, "notes", ["d1", "bad\x00"])
        assert tasks.client.store.get_collection("notes").total() == 1
