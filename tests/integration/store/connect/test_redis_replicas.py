"""store/connect/redis.py's ``replicated``: a write to a Sentinel's master counts as done only once a replica has
it, so a failover cannot drop a write that was acknowledged (the push's copy, a task's publish)."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from store.connect.redis import redis_client, replicated
from tests.services import redis_server, sentinel_group


def test_a_write_a_replica_has_is_done(tmp_path: Path) -> None:
    with sentinel_group(tmp_path) as group:
        client = redis_client(group.url, timeout=5)
        with client.pipeline(transaction=False) as pipe:
            pipe.set("vs-replicated", "1")
            pipe.incr("vs-count")
            assert replicated(client, pipe) == [True, 1]
        client.close()


def test_a_write_no_replica_acknowledges_fails_and_drops_the_connections() -> None:
    """A master no replica follows (as an old master is for seconds after the Sentinels promote its replica):
    the write is refused to the caller, and the next try opens a new connection, asking where the master is."""
    with redis_server() as (url, _process):
        client, watcher = redis_client(url, timeout=5), redis.Redis.from_url(url)
        client.client_setname("vs-writer")
        names = lambda: [c["name"] for c in watcher.client_list()]  # noqa: E731
        assert "vs-writer" in names()
        with client.pipeline(transaction=False) as pipe, pytest.raises(redis.ConnectionError, match="no replica"):
            pipe.set("vs-replicated", "1")
            replicated(client, pipe)
        assert "vs-writer" not in names()  # its connection was closed
        client.close()
        watcher.close()
