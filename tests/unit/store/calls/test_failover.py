"""Failover over a chain's entries, against fake OpenAI servers: retries, Retry-After, the next entry, cool-down (the
chain of embedding providers it runs for: tests/unit/store/embeddings/test_chain.py)."""

from __future__ import annotations

import time

import pytest

from store.embeddings.providers.fake import hash_embed
from store.errors import InputError, PermanentError, TransientError
from tests.fake_openai import FakeOpenAI
from tests.unit.store.embeddings.test_chain import chain_of


def test_429_then_success_waits_retry_after(primary: FakeOpenAI) -> None:
    primary.push(status=429, headers={"Retry-After": "0.3"})
    chain = chain_of(primary, max_wait_seconds=0.4)
    started = time.monotonic()
    vectors, made_by = chain.embed_batch(["alpha", "beta"])
    assert time.monotonic() - started >= 0.3
    assert primary.calls == 2
    assert vectors == [hash_embed("alpha", 8), hash_embed("beta", 8)]
    assert made_by == f"text-embedding-test@{primary.url}"
    assert chain.stats.retries == {"m0": 1}
    assert chain.stats.calls == {"m0": 2}


def test_a_retry_after_longer_than_max_wait_is_honoured_by_failing_over(
    primary: FakeOpenAI, backup: FakeOpenAI
) -> None:
    primary.push(status=429, headers={"Retry-After": "30"})
    alone = chain_of(primary, max_wait_seconds=0.1)
    started = time.monotonic()
    with pytest.raises(TransientError) as waiting:
        alone.embed_batch(["alpha"])
    assert time.monotonic() - started < 1.0 and primary.calls == 1  # not hammered after 0.1 s
    assert waiting.value.retry_after is not None and waiting.value.retry_after >= 29  # the task retries then
    primary.push(status=429, headers={"Retry-After": "30"})
    pair = chain_of(primary, backup, max_wait_seconds=0.1)
    assert pair.embed_batch(["alpha"])[0] == [hash_embed("alpha", 8)]
    assert (primary.calls, backup.calls) == (2, 1)
    pair.embed_batch(["beta"])
    assert primary.calls == 2  # still cooling down for the 30 s it asked for


def test_timeout_then_success(primary: FakeOpenAI) -> None:
    primary.push(delay=0.6)
    chain = chain_of(primary, model={"timeout": 0.2})
    chain.embed_batch(["alpha"])
    assert primary.calls == 2


def test_transient_errors_stop_after_max_attempts(primary: FakeOpenAI) -> None:
    primary.always(status=500)
    chain = chain_of(primary, max_attempts=4)
    with pytest.raises(TransientError, match="answered 500"):
        chain.embed_batch(["alpha"])
    assert primary.calls == 4
    assert chain.stats.retries == {"m0": 3}


def test_primary_down_for_good_fails_over_and_cools_down(primary: FakeOpenAI, backup: FakeOpenAI) -> None:
    primary.always(status=500)
    chain = chain_of(primary, backup)
    vectors, _ = chain.embed_batch(["alpha"])
    assert vectors == [hash_embed("alpha", 8)]
    assert (primary.calls, backup.calls) == (3, 1)
    chain.embed_batch(["beta"])
    assert (primary.calls, backup.calls) == (3, 2)  # cooling down: not touched
    assert chain.stats.failovers == {"m0": 1}


def test_cool_down_ends(primary: FakeOpenAI, backup: FakeOpenAI) -> None:
    primary.push(status=401)
    chain = chain_of(primary, backup, cooldown_seconds=0.2)
    chain.embed_batch(["alpha"])
    time.sleep(0.25)
    chain.embed_batch(["beta"])
    assert (primary.calls, backup.calls) == (2, 1)


def test_400_is_raised_at_once_without_failover(primary: FakeOpenAI, backup: FakeOpenAI) -> None:
    primary.push(status=400, message="input is too long")
    chain = chain_of(primary, backup)
    with pytest.raises(InputError) as raised:
        chain.embed_batch(["alpha"])
    assert str(raised.value) == f"model 'text-embedding-test' at {primary.url} answered 400: input is too long"
    assert (primary.calls, backup.calls) == (1, 0)
    chain.embed_batch(["beta"])
    assert primary.calls == 2  # an input error is no reason to cool down


def test_401_fails_over_at_once(primary: FakeOpenAI, backup: FakeOpenAI) -> None:
    primary.always(status=401)
    chain = chain_of(primary, backup)
    chain.embed_batch(["alpha"])
    assert (primary.calls, backup.calls) == (1, 1)
    assert chain.stats.retries == {}
    chain.embed_batch(["beta"])
    assert (primary.calls, backup.calls) == (1, 2)


def test_every_entry_failing_raises_the_transient_error(primary: FakeOpenAI, backup: FakeOpenAI) -> None:
    primary.always(status=503)
    backup.always(status=401)
    chain = chain_of(primary, backup)
    with pytest.raises(TransientError, match="answered 503"):
        chain.embed_batch(["alpha"])
    with pytest.raises(TransientError, match=r"every embedding model \('m0', 'm1'\) is cooling down") as raised:
        chain.embed_batch(["alpha"])
    assert 59 < (raised.value.retry_after or 0) <= 60
    assert (primary.calls, backup.calls) == (3, 1)


def test_every_entry_permanent_raises_the_last_permanent_error(primary: FakeOpenAI, backup: FakeOpenAI) -> None:
    primary.always(status=401)
    backup.always(status=404)
    with pytest.raises(PermanentError, match="answered 404"):
        chain_of(primary, backup).embed_batch(["alpha"])
