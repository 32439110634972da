"""The capture relays of a worker's main process (``worker.runtime.relays``): one thread per relay, started when
the worker is ready and stopped with it, closing the producer they send through; none without a captured source."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from store.broker import producer
from store.settings import Settings
from worker.runtime import relays


class Closes:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


class Relay(Closes):
    """A relay that runs until it is told to stop."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.names = [name]
        self.running = threading.Event()

    def run(self, stop: threading.Event) -> None:
        self.running.set()
        stop.wait()


@pytest.fixture
def producers(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Closes]]:
    made: list[Closes] = []

    def make(settings: Settings) -> Closes:
        made.append(Closes())
        return made[-1]

    monkeypatch.setattr(producer, "Producer", make)
    yield made
    relays.stop_relays()


def test_without_a_captured_source_no_relay_runs_and_its_producer_is_closed(
    producers: list[Closes], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(relays, "relays_from_settings", lambda settings, sender: [])
    assert relays.start_relays(Settings()) is None
    assert relays.running == [] and [p.closed for p in producers] == [True]


def test_each_relay_runs_in_its_own_thread_until_the_worker_stops_them_all(
    producers: list[Closes], monkeypatch: pytest.MonkeyPatch
) -> None:
    made = [Relay("notes"), Relay("docs")]
    sent_through: list[Any] = []

    def relays_from_settings(settings: Settings, sender: Any) -> list[Relay]:
        sent_through.append(sender)
        return made

    monkeypatch.setattr(relays, "relays_from_settings", relays_from_settings)
    started = relays.start_relays(Settings())
    assert started is not None and relays.running == [started] and sent_through == producers
    assert all(relay.running.wait(5) for relay in made)
    relays.stop_relays()
    assert relays.running == [] and not any(thread.is_alive() for thread in started.threads)
    assert all(relay.closed for relay in made) and [p.closed for p in producers] == [True]
