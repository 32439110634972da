"""Benchmark taking tasks off a Redis broker: ``store.transport.redis`` against kombu's own transport.

    .venv/bin/python -m bench.broker [--quick]

Ours takes each message and records it as unacknowledged with one script (``TAKE``), and an idle consumer
waits on a bell; kombu's pops with ``BRPOP`` and records in a second round trip. On a redis-server of its
own, each round publishes the same messages and consumes them through one kombu consumer that acks each,
kombu's transport and ours taking turns; the best round of each counts. Then the latency of a message
published to a consumer that has waited idle, as a live ``index_record`` often is. ``ratio`` is ours over
kombu's: above 1 is more tasks per second, or a longer wait. Never run as a test.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import threading
import time
from typing import Any

from kombu import Connection, Exchange, Queue

from bench.report import Row, print_table
from store.transport.redis import Transport
from tests.services import redis_server

__all__ = ["main", "run"]

SECTION = "broker"
QUEUE = Queue("bench-take", Exchange("bench-take", "direct"), "bench-take")
TRANSPORTS: dict[str, Any] = {"kombu": "redis", "ours": Transport}


def _publish(url: str, count: int) -> None:
    with Connection(url, transport=Transport) as connection:
        producer = connection.Producer()
        for n in range(count):
            producer.publish(
                {"batch": n}, exchange=QUEUE.exchange, routing_key=QUEUE.routing_key, declare=[QUEUE], serializer="json"
            )


def _consumed_per_second(url: str, transport: Any, count: int) -> float:
    """Messages taken and acked per second, ``count`` of them already queued."""
    done = 0

    def take(body: Any, message: Any) -> None:
        nonlocal done
        message.ack()
        done += 1

    with Connection(url, transport=transport) as connection, connection.Consumer(QUEUE, callbacks=[take]) as consumer:
        consumer.qos(prefetch_count=1)
        start = time.perf_counter()
        while done < count:
            connection.drain_events(timeout=5)
        return count / (time.perf_counter() - start)


def _idle_latency(url: str, transport: Any, samples: int) -> float:
    """Median seconds from a publish to its delivery, to a consumer idle for a while before each."""
    delivered = threading.Event()
    seen: list[float] = []

    def take(body: Any, message: Any) -> None:
        seen.append(time.perf_counter())
        message.ack()
        delivered.set()

    latencies = []
    with Connection(url, transport=transport) as connection, connection.Consumer(QUEUE, callbacks=[take]):
        stop = threading.Event()

        def drain() -> None:
            while not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    connection.drain_events(timeout=0.5)

        thread = threading.Thread(target=drain, daemon=True)
        thread.start()
        for _ in range(samples):
            time.sleep(1.3)  # idle past a 1 s BRPOP: the consumer waits in Redis
            delivered.clear()
            sent = time.perf_counter()
            _publish(url, 1)
            if not delivered.wait(10):
                raise RuntimeError("a published message was not delivered within 10 s")
            latencies.append(seen[-1] - sent)
        stop.set()
        thread.join(timeout=5)
    return statistics.median(latencies)


def run(quick: bool = False) -> list[Row]:
    count, rounds, samples = (500, 2, 3) if quick else (5000, 3, 9)
    best: dict[str, float] = {}
    latency: dict[str, float] = {}
    with redis_server() as (url, _process):
        for _ in range(rounds):
            for name, transport in TRANSPORTS.items():
                _publish(url, count)
                best[name] = max(best.get(name, 0.0), _consumed_per_second(url, transport, count))
        for name, transport in TRANSPORTS.items():
            latency[name] = _idle_latency(url, transport, samples)
    detail = f"{count:,} messages queued, prefetch 1, each acked; best of {rounds} rounds"
    return [
        Row(SECTION, "kombu's transport: tasks taken per second", best["kombu"], "msg/s", detail=detail),
        Row(
            SECTION,
            "ours (TAKE): tasks taken per second",
            best["ours"],
            "msg/s",
            ratio=best["ours"] / best["kombu"],
            detail=detail,
        ),
        Row(SECTION, "kombu's transport: idle consumer, publish to delivery", latency["kombu"] * 1000, "ms"),
        Row(
            SECTION,
            "ours (bell): idle consumer, publish to delivery",
            latency["ours"] * 1000,
            "ms",
            ratio=latency["ours"] / latency["kombu"],
            detail=f"median of {samples}, each after 1.3 s idle",
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.broker", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    print_table(run(quick=parser.parse_args().quick))


if __name__ == "__main__":
    main()
