"""Real ``celery worker`` processes for integration tests, a SQL source table to index, and a plain SQL client
that writes it as psql would (for change capture: no vectorsync code in the writer)."""

from __future__ import annotations

import fcntl
import os
import pty
import random
import select
import signal
import socket
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil
import psycopg
import sqlalchemy as sa
from celery import Celery

from store.broker.config import celery_config
from store.connect.postgres import engine_url
from store.contract import BULK_QUEUE, LIVE_QUEUE
from store.settings import Settings, load_settings

__all__ = [
    "METRICS_FOLDER_ENV",
    "OUTBOX",
    "ROOT",
    "SHORT_LIMITS",
    "CrmTable",
    "Psql",
    "celery_worker",
    "child_env",
    "insert_notes",
    "note",
    "outbox_rows",
    "process_env",
    "pushed_collection",
    "run_cli",
    "run_on_terminal",
    "sql_collection",
    "wait_for",
    "worker_sections",
]

ROOT = Path(__file__).resolve().parent.parent
#: Change capture's outbox table (store.capture.sql.OUTBOX), in the source database.
OUTBOX = "vectorsync_outbox"


#: The multiprocess metrics folder prometheus_client reads (worker.metrics.series sets it when the app is imported).
METRICS_FOLDER_ENV = "PROMETHEUS_MULTIPROC_DIR"


def wait_for(check: Callable[[], Any], *, timeout: float = 120, every: float = 0.2, what: str = "condition") -> Any:
    """Poll ``check`` until it returns something truthy; fail with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(every)


def child_env() -> dict[str, str]:
    """This environment for a child process, less what this test process picked up: VECTORSYNC_ settings,
    and the metrics folder that importing the worker app made for this process (a child sharing it shared
    its prometheus files and, in the full suite, no longer stopped on SIGINT)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("VECTORSYNC_") and k != METRICS_FOLDER_ENV}


def process_env(config: Path) -> dict[str, str]:
    """This environment for a vectorsync process: no stray VECTORSYNC_ settings, ``config`` as the file."""
    env = child_env()
    env["VECTORSYNC_CONFIG"] = str(config)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


@contextmanager
def celery_worker(
    config: Path,
    *,
    concurrency: int = 2,
    name: str = "w1",
    queues: tuple[str, ...] = (LIVE_QUEUE, BULK_QUEUE),
    prefix: Sequence[str] = (),
    celery: Sequence[str] = (sys.executable, "-m", "celery"),
    cwd: Path = ROOT,
    env: Mapping[str, str] | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    """``celery -A worker worker`` with these settings; yields once it answers a ping. ``prefix`` runs it
    through a command that execs it (``ip netns exec NAME``: the process is the worker itself); ``celery``,
    ``cwd`` and ``env`` (default: ``process_env``) are another environment's (an installed wheel's)."""
    log = open(config.parent / f"{name}.log", "wb")  # noqa: SIM115 - kept open for the process's life
    command = [
        *prefix,
        *celery,
        "-A",
        "worker",
        "worker",
        "--loglevel",
        os.environ.get("VECTORSYNC_TEST_WORKER_LOGLEVEL", "INFO"),
        "-c",
        str(concurrency),
        "-n",
        f"{name}@%h",
        "-Q",
        ",".join(queues),
        "--without-gossip",
        "--without-mingle",
        "-E",
    ]
    environment = dict(env) if env is not None else process_env(config)
    process = subprocess.Popen(command, cwd=cwd, env=environment, stdout=log, stderr=subprocess.STDOUT)
    app = Celery("vectorsync-test", set_as_current=False)
    app.conf.update(celery_config(load_settings(config)))
    try:
        # This worker's own answer: with another worker running, any answer to a broadcast ping came too soon.
        node = f"{name}@{socket.gethostname()}"
        wait_for(
            lambda: process.poll() is not None or app.control.ping(destination=[node], timeout=0.5),
            timeout=60,
            what=f"worker {name} to answer a ping",
        )
        if process.poll() is not None:
            raise AssertionError(f"worker {name} exited: {(config.parent / f'{name}.log').read_text()[-3000:]}")
        yield process
    finally:
        _stop(process)
        app.close()
        log.close()


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    children = psutil.Process(process.pid).children(recursive=True)
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)
    for child in children:
        if child.is_running():
            child.kill()


def pool_processes(worker: subprocess.Popen[bytes]) -> list[psutil.Process]:
    """The prefork children of a worker: the processes that run tasks."""
    return psutil.Process(worker.pid).children()


def run_on_terminal(
    config: Path,
    *args: str,
    columns: int = 120,
    timeout: float = 120,
    answer: str | None = None,
    prompt: bytes = b"[y/N]",
) -> str:
    """Run ``vectorsync ARGS`` on a pseudo-terminal ``columns`` wide; what the screen got. ``answer`` is typed
    once ``prompt`` shows."""
    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    env = process_env(config) | {"TERM": "xterm-256color", "COLUMNS": str(columns)}
    process = subprocess.Popen(
        [sys.executable, "-m", "producer.cli", *args],
        cwd=ROOT,
        env=env,
        stdin=child,
        stdout=child,
        stderr=child,
        close_fds=True,
    )
    os.close(child)
    output = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([main], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(main, 65536)
            except OSError:
                break
            if not chunk:
                break
            output += chunk
            if answer is not None and prompt in output:
                os.write(main, answer.encode() + b"\n")
                answer = None
        elif process.poll() is not None:
            break
    process.wait(timeout=30)
    os.close(main)
    return output.decode(errors="replace")


def run_cli(config: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run ``vectorsync ARGS`` as a script would: output to a pipe, nothing on stdin."""
    return subprocess.run(
        [sys.executable, "-m", "producer.cli", *args],
        cwd=ROOT,
        env=process_env(config),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


#: The words CRM notes are made of.
WORDS = [
    "onboarding",
    "rollout",
    "invoice",
    "renewal",
    "pricing",
    "discount",
    "contract",
    "meeting",
    "call",
    "email",
    "churn",
    "support",
    "integration",
    "migration",
    "security",
    "review",
    "budget",
    "approval",
    "timeline",
    "pilot",
]


def note(i: int, *, version: int = 0, rng: random.Random | None = None) -> dict[str, object]:
    """Row ``i`` of a CrmTable at ``version``: the same words each time it is asked for."""
    rng = rng or random.Random(i * 7919 + version)
    body = " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 120)))
    return {"id": i, "title": f"Note {i} v{version}", "body": body, "kind": rng.choice(["call", "email", "meeting"])}


class CrmTable:
    """A source table of CRM notes: ``id``, ``title``, ``body``, ``kind``, ``updated_at``."""

    def __init__(self, url: str, name: str) -> None:
        self.engine = sa.create_engine(engine_url(url), pool_pre_ping=True)  # survives a database restart
        self.name = name
        self.table = sa.Table(
            name,
            sa.MetaData(),
            sa.Column("id", sa.Integer, primary_key=True),
            sa.Column("title", sa.Text, nullable=False),
            sa.Column("body", sa.Text, nullable=False),
            sa.Column("kind", sa.Text, nullable=False),
            sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        )
        with self.engine.begin() as conn:
            self.table.drop(conn, checkfirst=True)
            self.table.create(conn)

    def insert(self, rows: list[dict[str, Any]]) -> None:
        with self.engine.begin() as conn:
            conn.execute(sa.insert(self.table), rows)

    def update(self, id: int, **values: Any) -> None:
        with self.engine.begin() as conn:
            conn.execute(sa.update(self.table).where(self.table.c.id == id).values(**values, updated_at=sa.func.now()))

    def delete(self, ids: list[int]) -> None:
        with self.engine.begin() as conn:
            conn.execute(sa.delete(self.table).where(self.table.c.id.in_(ids)))

    def rows(self) -> dict[str, dict[str, Any]]:
        with self.engine.connect() as conn:
            return {str(r.id): dict(r._mapping) for r in conn.execute(sa.select(self.table))}

    def close(self) -> None:
        self.engine.dispose()


def settings_toml(
    *,
    broker: str,
    cache: str,
    database: str,
    openai_url: str,
    table: str,
    collection: str,
    dimensions: int = 8,
    max_tokens: int = 64,
    overlap: int = 8,
    batch_size: int = 50,
    metrics_port: int = 0,
    extra: str = "",
    capture: bool = False,
    source_url: str | None = None,
    limits: Mapping[str, float] | None = None,
) -> str:
    """A vectorsync.toml for integration tests: SQL source (``capture``: with triggers; ``source_url``: read
    through a role of its own), fake OpenAI server, pgvector; ``limits`` in place of ``SHORT_LIMITS``."""
    worker = {"batch_size": batch_size, "max_retries": 2, "retry_delay": 0.2, "metrics_port": metrics_port}
    head = worker_sections(broker=broker, database=database, dimensions=dimensions, **worker, **(limits or {}))
    source = sql_collection(
        database=source_url or database,
        table=table,
        collection=collection,
        max_tokens=max_tokens,
        overlap=overlap,
        capture=capture,
    )
    return f"""
{head}
[cache]
url = "{cache}"

[models.fake_openai]
provider = "openai"
model = "text-embedding-test"
dimensions = {dimensions}
base_url = "{openai_url}"
timeout = 5

[embeddings]
chain = ["fake_openai"]
batch_size = 64
max_attempts = 2
max_wait_seconds = 0.2
cooldown_seconds = 1

{source}
{extra}
"""


#: The tests' workers' short [worker] time limits, and the broker's visibility timeout above them.
SHORT_LIMITS = {"time_limit": 50, "index_time_limit": 55, "visibility_timeout": 60}


def worker_sections(*, broker: str, database: str, dimensions: int, **worker: float) -> str:
    """The [broker], [worker] and [vectors] sections every integration test's settings share: ``SHORT_LIMITS``
    (``worker`` may replace them), pgvector at ``database``; ``worker`` adds [worker] keys."""
    limits = SHORT_LIMITS | worker
    visibility_timeout = limits.pop("visibility_timeout")
    keys = "".join(f"{key} = {value}\n" for key, value in limits.items())
    return (
        f'[broker]\nurl = "{broker}"\nvisibility_timeout = {visibility_timeout}\n\n'
        f"[worker]\n{keys}\n"
        f'[vectors]\nstore = "pgvector"\nurl = "{database}"\ndimensions = {dimensions}\n'
    )


def sql_collection(
    *, database: str, table: str, collection: str, max_tokens: int = 64, overlap: int = 8, capture: bool = False
) -> str:
    """The settings of a collection over a CrmTable: its SQL source (with ``capture``, triggers write its
    changes to the outbox) and its chunker."""
    return f"""
[collections.{collection}.source]
kind = "sql"
capture = "{"trigger" if capture else "off"}"
url = "{database}"
table = "{table}"
text = "{{title}}\\n\\n{{body}}"
metadata = ["kind"]
updated_at = "updated_at"

[collections.{collection}.chunker]
max_tokens = {max_tokens}
overlap = {overlap}
"""


def pushed_collection(folder: Path, database: str, name: str, *, dimensions: int, keywords: bool = False) -> Path:
    """A settings file for a pushed collection ``name`` on pgvector (fake embeddings, no cache); with
    ``keywords``, it keeps the keyword index (``search.keywords``)."""
    config = folder / "vectorsync.toml"
    config.write_text(
        f'[vectors]\nstore = "pgvector"\nurl = "{database}"\ndimensions = {dimensions}\n'
        f'[embeddings]\ncache_ttl_days = 0\n[collections.{name}.source]\nkind = "push"\n'
        + (f"[collections.{name}.search]\nkeywords = true\n" if keywords else "")
    )
    return config


def store_records(config: Path, name: str, records: Sequence[tuple[str, str, dict[str, Any]]]) -> None:
    """Store each ``(record_id, text, metadata)`` as one chunk of ``name`` (``record_id:0``), embedded with
    the settings' own model, as a worker would have indexed it."""
    from store.embeddings import Embeddings
    from store.vectors import VectorRecord
    from store.vectors.backends import open_store

    settings = load_settings(config)
    embedder = Embeddings.from_settings(settings)
    with open_store(settings, embedder=embedder) as store:
        store.get_collection(name, create=True).upsert_many(
            [
                VectorRecord(f"{rid}:0", embedder.embed(text), text, {"record_id": rid, **metadata})
                for rid, text, metadata in records
            ]
        )


class Psql:
    """A plain client of the source database, as psql or a service in another language writes: autocommit
    statements, or one explicit transaction (``transaction``)."""

    def __init__(self, url: str) -> None:
        self.conn = psycopg.connect(url, autocommit=True)

    def run(self, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
        with self.conn.cursor() as cur:
            cur.execute(statement, params)
            return cur.fetchall() if cur.description else []

    @contextmanager
    def transaction(self) -> Iterator[Psql]:
        with self.conn.transaction():
            yield self

    def close(self) -> None:
        self.conn.close()


def insert_notes(sql: Psql, table: str, rows: list[dict[str, Any]]) -> None:
    """One INSERT statement for all ``rows`` (arrays unnested server-side, as a bulk loader sends them)."""
    sql.run(
        f'INSERT INTO "{table}" (id, title, body, kind) '
        "SELECT * FROM unnest(%s::int[], %s::text[], %s::text[], %s::text[])",
        ([r["id"] for r in rows], [r["title"] for r in rows], [r["body"] for r in rows], [r["kind"] for r in rows]),
    )


def outbox_rows(sql: Psql, collection: str) -> int:
    """Rows of ``collection`` in the outbox (0 when there is none); inside a transaction, its own rows too."""
    if sql.run(f"SELECT to_regclass('{OUTBOX}')")[0][0] is None:
        return 0
    return int(sql.run(f"SELECT count(*) FROM {OUTBOX} WHERE collection = %s", (collection,))[0][0])


def expected_chunks(
    settings: Settings, collection: str, rows: dict[str, dict[str, Any]]
) -> dict[str, tuple[str, dict[str, Any]]]:
    """What the store must hold for these source rows: chunk id -> (text, metadata)."""
    from worker.pipeline.chunker import Chunker

    chunker = Chunker.from_settings(settings.collections[collection].chunker)
    expected = {}
    for record_id, row in rows.items():
        for index, chunk in enumerate(chunker.split(f"{row['title']}\n\n{row['body']}")):
            metadata = {"kind": row["kind"], "record_id": record_id, "chunk": index}
            expected[f"{record_id}:{index}"] = (chunk.text, metadata)
    return expected


def stored_chunks(url: str, table: str) -> dict[str, tuple[str, dict[str, Any]]]:
    """What the pgvector table holds: chunk id -> (text, metadata)."""
    engine = sa.create_engine(engine_url(url))
    try:
        if not sa.inspect(engine).has_table(table):
            return {}
        with engine.connect() as conn:
            rows = conn.execute(sa.text(f'SELECT id, text, metadata FROM "{table}"')).all()  # test-owned name
    finally:
        engine.dispose()
    return {r.id: (r.text, r.metadata) for r in rows}
