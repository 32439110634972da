"""Session-wide real services: PostgreSQL with pgvector, and Redis."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.services import embedded_postgres, redis_answers, redis_db, redis_server

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """VECTORSYNC_TEST_DATABASE_URL, else an embedded PostgreSQL started for this session."""
    given = os.environ.get("VECTORSYNC_TEST_DATABASE_URL")
    if given:
        yield given
        return
    # Short path: the server's Unix socket lives in this folder (108-byte limit).
    with tempfile.TemporaryDirectory(prefix="vspg") as folder, embedded_postgres(Path(folder) / "data") as url:
        yield url


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """VECTORSYNC_TEST_REDIS_URL, else 127.0.0.1:6379 when it answers, else a redis-server started here."""
    given = os.environ.get("VECTORSYNC_TEST_REDIS_URL")
    if given:
        yield given
    elif redis_answers(DEFAULT_REDIS_URL):
        yield DEFAULT_REDIS_URL
    else:
        with redis_server() as (url, _process):
            yield url


@pytest.fixture(scope="session")
def broker_redis_url(redis_url: str) -> Iterator[str]:
    """A Redis for Celery brokers in integration tests.

    Its own redis-server, so two test runs on one machine never consume each
    other's tasks; VECTORSYNC_TEST_REDIS_URL (database 12) when that is set.
    """
    if os.environ.get("VECTORSYNC_TEST_REDIS_URL"):
        yield redis_db(redis_url, 12)
        return
    with redis_server() as (url, _process):
        yield url
