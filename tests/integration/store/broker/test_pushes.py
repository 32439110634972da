"""Pushed documents kept until indexed (store.broker.pushes), on a real Redis: the newest push of a document is
kept, a settle drops only the version it names or an older one, and the sweep reads what was sent long ago."""

from __future__ import annotations

import logging
import time
import uuid

import pytest

from store.broker.producer import Producer
from store.broker.pushes import Push, Pushes
from store.errors import StoreUnavailable
from store.settings import Settings
from tests.services import free_port

#: Nanosecond versions, 1 apart: a double (Lua's numbers) cannot tell them apart.
V1, V2 = 1_764_806_400_000_000_001, 1_764_806_400_000_000_002


@pytest.fixture
def pushes(redis_url: str) -> Pushes:
    return Pushes(redis_url)


def _push(id: str, version: int, *, text: str | None = "text", sent_at: float | None = None) -> Push:
    return Push(id, text, {"k": "é"}, version, time.time() if sent_at is None else sent_at)


def test_the_newest_push_is_kept_and_a_settle_drops_only_what_it_indexed(pushes: Pushes) -> None:
    collection = f"docs_{uuid.uuid4().hex[:8]}"
    pushes.keep(collection, _push("a", V2, text="newer", sent_at=1.0))
    pushes.keep(collection, _push("a", V1, text="older", sent_at=1.0))  # taken after the newer one: not kept
    [kept] = pushes.lost(collection, older_than=0)
    assert (kept.text, kept.version, kept.metadata) == ("newer", V2, {"k": "é"})
    pushes.settle(collection, "a", V1)  # an older push indexed: the newer one still waits
    assert [p.version for p in pushes.lost(collection, older_than=0)] == [V2]
    pushes.settle(collection, "a", V2)
    assert list(pushes.lost(collection, older_than=0)) == []
    pushes.close()


def test_the_sweep_reads_only_pushes_sent_longer_ago_than_it_asks(pushes: Pushes) -> None:
    collection = f"docs_{uuid.uuid4().hex[:8]}"
    pushes.keep(collection, _push("old", V1, sent_at=time.time() - 120))
    pushes.keep(collection, _push("gone", V1, text=None, sent_at=time.time() - 120))
    pushes.keep(collection, _push("new", V1))
    lost = {p.id: p.text for p in pushes.lost(collection, older_than=60)}
    assert lost == {"old": "text", "gone": None}
    for id in ("old", "gone", "new"):
        pushes.settle(collection, id, V1)
    pushes.close()


def test_without_a_redis_nothing_is_kept() -> None:
    pushes = Pushes("amqp://guest@127.0.0.1//")
    pushes.keep("docs", _push("a", V1))
    pushes.settle("docs", "a", V1)
    assert list(pushes.lost("docs", older_than=0)) == []


def test_a_producer_keeps_each_push_before_sending_it_and_forgets_one_it_could_not_send(redis_url: str) -> None:
    collection = f"docs_{uuid.uuid4().hex[:8]}"
    settings = Settings.model_validate(
        {
            "broker": {"url": "memory://"},
            "cache": {"url": redis_url},
            "collections": {collection: {"source": {"kind": "push"}}},
        }
    )
    sent: list[object] = []
    producer = Producer(settings, send=lambda *args, **kwargs: sent.append(kwargs))
    producer.index_document(collection, "a", "text", version=V1)
    producer.delete_document(collection, "b", version=V1)
    assert {p.id: p.text for p in producer.pushes.lost(collection, older_than=0)} == {"a": "text", "b": None}
    assert len(sent) == 2

    def refuse(*args: object, **kwargs: object) -> None:
        raise StoreUnavailable("the broker is down")

    producer.send = refuse
    with pytest.raises(StoreUnavailable):
        producer.index_document(collection, "c", "text", version=V1)
    assert {p.id for p in producer.pushes.lost(collection, older_than=0)} == {"a", "b"}  # c: the app was told
    for id in ("a", "b"):
        producer.pushes.settle(collection, id, V1)
    producer.close()


def test_a_push_that_cannot_be_kept_is_sent_all_the_same_and_a_warning_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A cache Redis that is down costs the copy, not the send (as coalescing degrades), and names no secret."""
    settings = Settings.model_validate(
        {
            "broker": {"url": "memory://"},
            "cache": {"url": f"redis://:hunter2@127.0.0.1:{free_port()}/0"},
            "collections": {"docs": {"source": {"kind": "push"}}},
        }
    )
    sent: list[object] = []
    producer = Producer(settings, send=lambda *args, **kwargs: sent.append(kwargs))
    with caplog.at_level(logging.WARNING, logger="store.broker.producer"):
        producer.index_document("docs", "a", "text", version=V1)
    assert len(sent) == 1
    assert "sent without a copy kept in Redis" in caplog.text and "hunter2" not in caplog.text
    producer.close()


def test_a_text_with_a_lone_surrogate_is_kept_as_celery_sends_it(pushes: Pushes) -> None:
    """redis-py writes strict UTF-8: the kept copy is ASCII JSON, escaping it, as the message's JSON does."""
    collection = f"docs_{uuid.uuid4().hex[:8]}"
    pushes.keep(collection, _push("a", V1, text="caf\udce9"))
    [kept] = pushes.lost(collection, older_than=-60)
    assert kept.text == "caf\udce9"
    pushes.settle(collection, "a", V1)
    pushes.close()
