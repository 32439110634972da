"""What the producer sends, against the real state database: a run whose task the broker does not take ends
failed, saying why, instead of staying ``running`` with no task behind it (a relay whose broker was silent left
one per attempt in a 30-minute chaos run of seed 23)."""

from __future__ import annotations

from typing import Any

import pytest

from store.broker.producer import Producer
from store.settings import Settings
from store.state.ledger import RunStatus
from store.state.ledger.postgres import PostgresLedger
from tests.backends import unique_name


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
