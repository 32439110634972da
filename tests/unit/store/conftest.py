"""Two fake OpenAI servers of a test's own, for the chains that fail over from one to the other (the failover
itself: calls/test_failover.py; the embedding chain: embeddings/test_chain.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fake_openai import FakeOpenAI


@pytest.fixture
def primary() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def backup() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server
