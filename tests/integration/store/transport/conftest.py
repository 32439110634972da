"""The redis-servers of the transport's tests: one in each form of URL (TCP, TLS, a Unix socket), or TCP alone."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.services import REDIS_FORMS, redis_server


@pytest.fixture(params=REDIS_FORMS)
def server(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[str]:
    """A redis-server of the test's own, in each form (TCP, TLS, a Unix socket): its URL."""
    with redis_server(form=request.param, folder=tmp_path) as (url, _process):
        yield url


@pytest.fixture
def tcp_server() -> Iterator[str]:
    with redis_server() as (url, _process):
        yield url
