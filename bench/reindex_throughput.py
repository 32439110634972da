"""Benchmark a whole reindex: real Redis, PostgreSQL+pgvector and two celery worker processes.

    .venv/bin/python -m bench.reindex_throughput [--records 10000]

Embeds with the local OpenAI-protocol server of the tests (no network, near
zero cost), so the figure is vectorsync's own overhead: source reads, hashing,
chunking, cache, COPY writes into an HNSW-indexed table, task fan-out.
A second reindex of the unchanged source measures the skip path.
Never run as a test; results go in the README.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from producer.client import Producer
from store.ledger import RunStatus
from store.settings import load_settings
from tests.fake_openai import FakeOpenAI
from tests.services import embedded_postgres, redis_server
from tests.workers import CrmTable, celery_worker, settings_toml

WORDS = ["onboarding", "rollout", "invoice", "renewal", "pricing", "discount", "contract", "meeting", "call",
         "email", "churn", "support"]


def run(producer: Producer, collection: str) -> float:
    start = time.perf_counter()
    run_id = producer.reindex_all(collection)
    while producer.reindex_status(run_id).status == RunStatus.RUNNING:
        time.sleep(0.1)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=10_000)
    args = parser.parse_args()
    rng = random.Random(3)
    with tempfile.TemporaryDirectory(prefix="vsbench") as folder, redis_server() as (redis_url, _), \
            embedded_postgres(Path(folder) / "pg") as database, FakeOpenAI(dimensions=384) as openai:
        crm = CrmTable(database, "bench_notes")
        crm.insert([{"id": i, "title": f"Note {i}", "kind": rng.choice(["call", "email"]),
                     "body": " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 200)))}
                    for i in range(1, args.records + 1)])
        config = Path(folder) / "vectorsync.toml"
        config.write_text(settings_toml(broker=redis_url, cache=redis_url, database=database, openai_url=openai.url,
                                        table="bench_notes", collection="notes", dimensions=384, max_tokens=256,
                                        overlap=32, batch_size=100))
        producer = Producer(load_settings(config))
        with celery_worker(config, concurrency=2, name="bench"):
            first = run(producer, "notes")
            second = run(producer, "notes")
        print(f"reindex of {args.records:,} records, 2 worker processes: {first:.1f} s, "
              f"{args.records / first:,.0f} records/s ({openai.calls} provider calls)")
        print(f"second reindex, nothing changed: {second:.1f} s, {args.records / second:,.0f} records/s")
        producer.close()
        crm.close()


if __name__ == "__main__":
    main()
