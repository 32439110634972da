"""Relays in threads: what a worker's main process starts at its start, and ``vectorsync relay`` runs."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Protocol

from store.capture.relay import Relay

__all__ = ["RelayThreads"]


class _Closes(Protocol):
    def close(self) -> None: ...


class RelayThreads:
    """One daemon thread per relay, stopped together; ``closing`` (the producer they send through) is closed
    after them."""

    def __init__(self, relays: Sequence[Relay], *, closing: Sequence[_Closes] = ()) -> None:
        self.relays = list(relays)
        self.closing = list(closing)
        self.stop_event = threading.Event()
        self.threads = [
            threading.Thread(target=relay.run, args=(self.stop_event,), daemon=True, name=f"vectorsync-relay-{i}")
            for i, relay in enumerate(self.relays)
        ]

    def start(self) -> RelayThreads:
        for thread in self.threads:
            thread.start()
        return self

    def wait(self) -> None:
        """Until ``stop`` (from another thread or a signal handler)."""
        while not self.stop_event.wait(0.5):
            pass

    def stop(self, timeout: float = 5.0) -> None:
        self.stop_event.set()
        for thread in self.threads:
            thread.join(timeout)
        for part in [*self.relays, *self.closing]:
            part.close()
