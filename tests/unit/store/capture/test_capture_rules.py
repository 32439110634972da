"""When beat sweeps and verifies a collection: a captured one reconciles on its own longer interval, and a pushed
one only where a Redis keeps its pushes (what capture itself needs: test_target.py)."""

from __future__ import annotations

from store.broker.config import beat_schedule
from store.settings import Settings
from tests.unit.store.capture.test_target import sql_collection


def test_a_captured_collection_reconciles_on_its_own_longer_interval() -> None:
    settings = Settings(collections={"a": sql_collection(capture="trigger"), "b": sql_collection()})
    schedule = beat_schedule(settings)
    assert schedule["reconcile-a"]["schedule"] == 86_400.0 and schedule["reconcile-b"]["schedule"] == 3600.0
    off = Settings(collections={"a": sql_collection(capture="trigger")}, capture={"reconcile_seconds": 0})
    assert "reconcile-a" not in beat_schedule(off)


def test_each_collection_is_verified_by_sample_every_verify_seconds_unless_off() -> None:
    from store.contract import BULK_QUEUE, VERIFY

    schedule = beat_schedule(Settings(collections={"a": sql_collection(), "b": sql_collection(capture="trigger")}))
    for name in ("a", "b"):
        assert schedule[f"verify-{name}"] == {
            "task": VERIFY,
            "schedule": 86_400.0,
            "args": (name,),
            "options": {"queue": BULK_QUEUE},
        }
    off = Settings(collections={"a": sql_collection()}, worker={"verify_seconds": 0})
    assert [key for key in beat_schedule(off) if key.startswith("verify-")] == []


def test_a_pushed_collection_is_swept_only_where_a_redis_keeps_its_pushes() -> None:
    """Its sweep sends again the pushes no worker took (store.broker.pushes), which a Redis keeps."""
    pushed = {"d": {"source": {"kind": "push"}}}
    assert beat_schedule(Settings(collections=pushed))["reconcile-d"]["schedule"] == 3600.0
    rabbit = Settings(collections=pushed, broker={"url": "amqp://guest@localhost//"})
    assert beat_schedule(rabbit) == {}  # nor verified: its verdict would have no Redis to be kept in
