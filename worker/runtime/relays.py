"""The capture relays a worker's main process runs (``store.capture.relay``), started when it is ready."""

from __future__ import annotations

import logging

from store.capture import RelayThreads, relays_from_settings
from store.settings import Settings

__all__ = ["running", "start_relays", "stop_relays"]

log = logging.getLogger(__name__)
#: This process's relays, while they run (a worker has one main process, and starts them once).
running: list[RelayThreads] = []


def start_relays(settings: Settings) -> RelayThreads | None:
    """One relay thread per source database of the declared SQL collections on PostgreSQL; None when none is."""
    from store.broker.producer import Producer

    producer = Producer(settings)
    relays = relays_from_settings(settings, producer)
    if not relays:
        producer.close()
        return None
    threads = RelayThreads(relays, closing=[producer]).start()
    running.append(threads)
    log.info("capture relay running for %s", ", ".join(name for relay in relays for name in relay.names))
    return threads


def stop_relays() -> None:
    while running:
        running.pop().stop()
