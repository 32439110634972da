"""Fixtures of the CLI's unit tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from store.client import Client
from store.process.defaults import use_client
from store.settings import load_settings
from store.state.ledger import MemoryLedger


@pytest.fixture
def ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MemoryLedger]:
    """The CLI's default client over a memory ledger (a producer's needs a state database otherwise)."""
    config = tmp_path / "vectorsync.toml"
    config.write_text(
        '[vectors]\nstore = "memory"\ndimensions = 8\n[embeddings]\ncache_ttl_days = 0\n'
        '[broker]\nurl = "memory://"\ncoalesce_seconds = 0\n[collections.notes]\nsource = { kind = "push" }\n'
    )
    monkeypatch.setenv("VECTORSYNC_CONFIG", str(config))
    memory = MemoryLedger()
    client = Client(load_settings(config), ledger=memory)
    previous = use_client(client)
    yield memory
    use_client(previous)
    client.close()
