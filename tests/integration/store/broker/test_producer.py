"""What the producer sends, against a real Redis broker and the real state database: repeated enqueues of a
queued record coalesced, bad arguments and pushes to a collection with a source refused before anything is sent,
and a run whose task the broker does not take ended failed, saying why, instead of staying ``running`` with no
task behind it (a relay whose broker was silent left one per attempt in a 30-minute chaos run of seed 23)."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from store import ConfigError
from store.broker.producer import Producer
from store.contract import INDEX_RECORD
from store.settings import CollectionSettings, Settings
from store.state.ledger import RunStatus
from store.state.ledger.postgres import PostgresLedger
from tests.backends import unique_name
from tests.integration.sending import queued


def refusing(name: str, **options: Any) -> None:
    raise ConnectionError("Timeout connecting to server")


@pytest.mark.parametrize("start", ["reindex_all", "reconcile"])
def test_a_run_whose_task_the_broker_refuses_ends_failed_naming_why(postgres_url: str, start: str) -> None:
    collection = unique_name("unsent")
    settings = Settings.model_validate(
        {
            "vectors": {"store": "memory", "dimensions": 8},
            "collections": {collection: {"source": {"kind": "sql", "url": postgres_url, "table": "t"}}},
        }
    )
    ledger = PostgresLedger(postgres_url)
    producer = Producer(settings, send=refusing, ledger=ledger)
    try:
        with pytest.raises(ConnectionError, match="Timeout connecting"):
            getattr(producer, start)(collection)
        [run] = [r for r in ledger.recent_runs(1000) if r.collection == collection]
        assert run.status == RunStatus.FAILED
        assert run.error == "its task could not be sent (ConnectionError: Timeout connecting to server)"
    finally:
        producer.close()
        ledger.close()


def test_repeated_enqueues_of_a_queued_record_are_coalesced(sender: Producer, broker: redis.Redis) -> None:
    assert sender.index_record("notes", 7) is True
    assert sender.index_record("notes", "7") is False
    assert sender.index_record("notes", 8) is True
    assert sorted(queued(broker)) == [(INDEX_RECORD, ["notes", "7"]), (INDEX_RECORD, ["notes", "8"])]
    sender.coalescer.release("notes", "7")  # what the worker does when the task starts
    assert sender.index_record("notes", 7) is True


def test_pushing_to_a_collection_with_a_source_is_refused(sender: Producer, broker: redis.Redis) -> None:
    sourced = Producer(
        sender.settings.model_copy(
            update={
                "collections": {
                    "notes": CollectionSettings.model_validate({"source": {"kind": "python", "loader": "x:y"}})
                }
            }
        )
    )
    try:
        with pytest.raises(ConfigError, match="reads its records from its python source; index_document"):
            sourced.index_document("notes", 1, "text")
        with pytest.raises(ConfigError, match="use index_record for this one"):
            sourced.delete_document("notes", 1)
    finally:
        sourced.close()
    assert queued(broker) == []


def test_bad_arguments_are_refused_before_anything_is_sent(sender: Producer, broker: redis.Redis) -> None:
    with pytest.raises(ConfigError, match="collection name 'Bad Name' is not allowed"):
        sender.index_record("Bad Name", 1)
    with pytest.raises(ConfigError, match="record id None is not allowed"):
        sender.index_record("notes", None)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="cannot be encoded as JSON"):
        sender.index_document("notes", 1, "text", {"when": object()})
    assert queued(broker) == []


def test_reindex_all_returns_a_run_id_whose_status_is_running(sender: Producer, broker: redis.Redis) -> None:
    run_id = sender.reindex_all("notes")
    status = sender.reindex_status(run_id)
    assert (status.status, status.total, status.done, status.skipped, status.failed) == ("running", None, 0, 0, 0)
    assert broker.llen("vectorsync.bulk") == 1
