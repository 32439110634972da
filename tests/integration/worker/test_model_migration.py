"""Changing a collection's model without downtime, end to end: real Redis, PostgreSQL+pgvector, two celery workers
with different settings, the CLI, and searches that run throughout.

Worker ``old`` runs the settings the collection was built with (chain ``small``, 8 dimensions, and no
``large`` model at all); worker ``new`` runs settings naming ``large`` (12 dimensions). Both take the
migration's batches and the live updates, and both must write each generation with its own model.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis
import sqlalchemy as sa

from store import query
from store.broker.producer import Producer
from store.connect.postgres import engine_url
from store.process.defaults import use_client
from store.settings import load_settings
from store.state.generations.migration import begin
from store.state.generations.postgres import PostgresGenerations
from tests.backends import unique_name
from tests.crm import CrmTable, expected_chunks, stored_chunks
from tests.settings_files import sql_collection, worker_sections
from tests.workers import celery_worker, run_cli, wait_for

pytestmark = pytest.mark.slow
RECORDS = 600
WORDS = [
    "onboarding",
    "rollout",
    "invoice",
    "renewal",
    "pricing",
    "discount",
    "contract",
    "meeting",
    "churn",
    "support",
    "integration",
    "security",
    "review",
    "budget",
    "approval",
    "timeline",
    "pilot",
    "email",
]


def settings(
    *, broker: str, database: str, table: str, collection: str, chain: str, dimensions: int, models: str
) -> str:
    return f"""
{
        worker_sections(
            broker=broker, database=database, dimensions=dimensions, batch_size=20, max_retries=1, retry_delay=0.2
        )
    }
[embeddings]
chain = ["{chain}"]
cache_ttl_days = 0
{models}
{sql_collection(database=database, table=table, collection=collection)}
"""


SMALL = '[models.small]\nprovider = "fake"\nmodel = "fake-small"\ndimensions = 8\n'
LARGE = '[models.large]\nprovider = "fake"\nmodel = "fake-large"\ndimensions = 12\n'
HUGE = '[models.huge]\nprovider = "fake"\nmodel = "fake-huge"\ndimensions = 5000\n'


def note(i: int, version: int = 0) -> dict[str, object]:
    rng = random.Random(i * 31 + version)
    return {
        "id": i,
        "title": f"Note {i} v{version}",
        "body": " ".join(rng.choices(WORDS, k=rng.randint(5, 60))),
        "kind": rng.choice(["call", "email"]),
    }


@dataclass
class Searches:
    """Searches through ``store.query.search`` with the old settings, in a thread, for as long as it runs."""

    collection: str
    found: list[tuple[float, int]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self.found.append((time.monotonic(), len(query.search(self.collection, "onboarding pricing", limit=5))))
            except Exception as exc:
                self.errors.append(f"{type(exc).__name__}: {exc}")
            time.sleep(0.01)


def batches(config: Path) -> int:
    """``index_batch`` tasks the worker started from ``config`` has finished (its log sits beside it)."""
    log = next(config.parent.glob("*.log")).read_text()
    return sum(1 for line in log.splitlines() if "vectorsync.index_batch[" in line and "succeeded" in line)


def models_of(database: str, table: str) -> set[str]:
    engine = sa.create_engine(engine_url(database))
    try:
        with engine.connect() as conn:
            return {row[0] for row in conn.execute(sa.text(f'SELECT DISTINCT model FROM "{table}"'))}  # test's name
    finally:
        engine.dispose()


@pytest.fixture
def folder(
    tmp_path: Path, broker_redis_url: str, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Path, Path, str, CrmTable]]:
    redis.Redis.from_url(broker_redis_url).flushdb()
    collection = unique_name("mig")
    crm = CrmTable(postgres_url, f"crm_{collection}")
    common = {"broker": broker_redis_url, "database": postgres_url, "table": crm.name, "collection": collection}
    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir()
    new.mkdir()
    (old / "vectorsync.toml").write_text(settings(**common, chain="small", dimensions=8, models=SMALL))
    (new / "vectorsync.toml").write_text(settings(**common, chain="large", dimensions=12, models=SMALL + LARGE + HUGE))
    monkeypatch.setenv("VECTORSYNC_CONFIG", str(old / "vectorsync.toml"))  # the app searches as before
    previous = use_client(None)  # the app's client: built from VECTORSYNC_CONFIG at its first search
    yield old / "vectorsync.toml", new / "vectorsync.toml", collection, crm
    app = use_client(previous)
    if app is not None:
        app.close()
    crm.close()


def test_migrate_keeps_answering_switches_atomically_and_both_worker_generations_agree(
    folder: tuple[Path, Path, str, CrmTable], postgres_url: str
) -> None:
    old, new, collection, crm = folder
    crm.insert([note(i) for i in range(1, RECORDS + 1)])
    prefix = load_settings(old).vectors.table_prefix
    gen1, gen2 = prefix + collection, prefix + collection + "__g2"
    registry = PostgresGenerations(postgres_url)
    with celery_worker(old, name="old") as _:
        first = run_cli(old, "reindex", collection, "--wait")
        assert first.returncode == 0, first.stdout + first.stderr
        with celery_worker(new, name="new", concurrency=1):
            migrate_with_both(old, new, collection, crm, postgres_url, gen1, gen2, registry)
    registry.close()


def holds(url: str, table: str, expected: dict[str, tuple[str, dict[str, object]]], *, alone: bool = False) -> bool:
    """Whether ``table`` holds the chunks of records 1 to 20 as ``expected`` (``alone``: and nothing else, as a
    generation being built holds only what live updates wrote to it)."""
    first = {key: value for key, value in expected.items() if int(key.split(":")[0]) <= 20}
    stored = stored_chunks(url, table)
    return stored == first if alone else all(stored.get(key) == value for key, value in first.items())


def migrate_with_both(
    old: Path,
    new: Path,
    collection: str,
    crm: CrmTable,
    postgres_url: str,
    gen1: str,
    gen2: str,
    registry: PostgresGenerations,
) -> None:
    if True:
        settings = load_settings(old)
        searches = Searches(collection)
        searcher = threading.Thread(target=searches.run)
        searcher.start()
        try:
            before = batches(old)
            # Generation 2 is registered first, its run not yet sent: from here on every write goes to both, and
            # the live updates below are written to both before the build can end and retire generation 1 (a
            # live task run after the switch writes generation 2 alone, by design, so updates racing the build
            # would leave generation 1 holding some of them or not, as the timing fell).
            app = Producer(load_settings(new))
            begin(app.settings, app.ledger.generations, collection, ["large"], embedded_by=app.ledger.models)
            app.close()
            producer = Producer(load_settings(old))  # the app, on its old settings, goes on updating records
            for i in range(1, 21):
                crm.update(i, title=f"Note {i} v1", body=f"edited during the migration {i} renewal")
                producer.index_record(collection, i)
            wait_for(
                lambda: (
                    holds(postgres_url, gen1, expected_chunks(settings, collection, crm.rows()))
                    and holds(postgres_url, gen2, expected_chunks(settings, collection, crm.rows()), alone=True)
                ),
                timeout=60,
                what="both generations to hold the updates made while generation 2 is registered",
            )
            started = run_cli(new, "migrate", collection, "--chain", "large")
            assert started.returncode == 0, started.stdout + started.stderr
            assert f"builds {collection}__g2 (large, 12 dimensions)" in started.stdout
            for i in range(21, 41):  # while the build runs: generation 2, live after the switch, must hold them
                crm.update(i, title=f"Note {i} v1", body=f"edited during the migration {i} renewal")
                producer.index_record(collection, i)
            producer.close()
            alias = wait_for(
                lambda: (a := registry.alias(collection)) is not None and a.live == 2 and a,
                timeout=180,
                what="the switch to generation 2",
            )
            switched_at = time.monotonic()
            wait_for(
                lambda: sum(1 for t, _ in searches.found if t > switched_at) >= 20,
                timeout=60,
                what="searches after the switch",
            )
        finally:
            searches.stop.set()
            searcher.join(timeout=30)

        assert not searches.errors, searches.errors[:3]
        assert len(searches.found) > 50
        assert {count for _, count in searches.found} == {5}  # never an empty (or short) answer, switch included
        assert any(t < switched_at for t, _ in searches.found)
        assert [g.number for g in alias.generations] == [1, 2] and alias.reads.chain == ("large",)

        # Generation 2 follows the source; generation 1 holds every update written before the build started,
        # each embedded by its own model, whichever worker wrote it.
        wait_for(
            lambda: stored_chunks(postgres_url, gen2) == expected_chunks(settings, collection, crm.rows()),
            timeout=60,
            what="generation 2 to hold the source, updates during the build included",
        )
        assert holds(postgres_url, gen1, expected_chunks(settings, collection, crm.rows()))
        assert models_of(postgres_url, gen1) == {"fake-small"}
        assert models_of(postgres_url, gen2) == {"fake-large"}
        # The migration's batches were the only bulk work meanwhile: both workers took some.
        assert batches(old) > before and batches(new) > 0, (before, batches(old), batches(new))

        # After the switch only the live generation is written; the old one is kept as it was.
        crm.update(1, title="Note 1 v2", body="after the switch")
        Producer(load_settings(new)).index_record(collection, 1)
        wait_for(
            lambda: stored_chunks(postgres_url, gen2) == expected_chunks(settings, collection, crm.rows()),
            timeout=60,
            what="the live generation to follow",
        )
        assert "after the switch" not in str(stored_chunks(postgres_url, gen1))

        listed = run_cli(new, "collections", "list")
        assert "reads g2" in listed.stdout and "retired" in listed.stdout, listed.stdout
        dropped = run_cli(new, "collections", "drop", f"{collection}__g1", "--yes")
        assert dropped.returncode == 0, dropped.stdout + dropped.stderr
        assert stored_chunks(postgres_url, gen1) == {}
        assert len(query.search(collection, "renewal", limit=3)) == 3
        live = run_cli(new, "collections", "drop", f"{collection}__g2", "--yes")
        assert live.returncode == 2 and "cannot be dropped alone" in live.stderr


def test_migrate_refuses_what_cannot_work_and_names_the_fix(
    folder: tuple[Path, Path, str, CrmTable], postgres_url: str
) -> None:
    old, new, collection, crm = folder
    crm.insert([note(i) for i in range(1, 4)])
    same = run_cli(old, "migrate", collection, "--chain", "small")
    assert same.returncode == 2 and "already" in same.stderr
    mixed = run_cli(new, "migrate", collection, "--chain", "large,small")
    assert mixed.returncode == 2 and "one size" in mixed.stderr and collection in mixed.stderr
    huge = run_cli(new, "migrate", collection, "--chain", "huge")
    assert huge.returncode == 2, huge.stdout
    assert f"{collection}__g2" in huge.stderr and "5000 dimensions" in huge.stderr and "fewer" in huge.stderr
    unknown = run_cli(new, "migrate", "nope", "--chain", "large")
    assert unknown.returncode == 2 and "not declared" in unknown.stderr
    created = run_cli(new, "collections", "create", f"{collection}__g2")  # a leftover under a generation's name
    assert created.returncode == 0, created.stderr
    leftover = run_cli(new, "migrate", collection, "--chain", "small")  # never indexed: generation 1 is "large"
    assert leftover.returncode == 2 and f"vectorsync collections drop {collection}__g2" in leftover.stderr
    assert PostgresGenerations(postgres_url).alias(collection) is None  # nothing was registered
