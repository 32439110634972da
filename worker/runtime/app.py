"""The Celery app: ``celery -A worker worker`` runs it, Flower (``python -m worker.runtime.flower``) watches it.

Configuration is read lazily from the settings (broker, time limits), with the
delivery guarantees of ``store.broker.config.celery_config``: JSON only,
acks_late, reject_on_worker_lost, prefetch 1, task events for Flower.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from typing import Any

from celery import Celery
from celery.signals import worker_init, worker_process_init, worker_process_shutdown, worker_ready, worker_shutdown

from store.broker.config import celery_config
from store.calls.threads import PROCESSES_ENV
from store.contract import BULK_QUEUE, LANE_TICK
from store.errors import SchemaTooNew, VectorsyncError
from store.settings import Settings, load_settings
from worker.metrics.series import prepare_environment, process_exited, serve, start_series

__all__ = ["app", "start_state"]

log = logging.getLogger(__name__)


def _config() -> dict[str, Any]:
    # The worker's own consumer: Celery's, with a heartbeat whose publish gives up (worker.runtime.heartbeat); its
    # own prefork pool, whose processes write each result whole (worker.runtime.prefork).
    return celery_config(load_settings()) | {
        "worker_consumer": "worker.runtime.heartbeat:Consumer",
        "worker_pool": "worker.runtime.prefork:TaskPool",
    }


def _refuse_unsupported_kombu() -> None:
    """Stop here, in one line naming the supported range, on a kombu the broker's Redis transport was not
    written for: Celery resolves the transport before any signal of the worker's (a worker on kombu 5.5 died
    with 60 lines of tracebacks, or at its first take with an AttributeError). The transport checks kombu's
    names as it is imported, once a process; Celery then finds it imported."""
    from store.transport.kombu_names import UnsupportedKombu

    try:
        import store.transport.redis  # noqa: F401
    except UnsupportedKombu as exc:
        raise SystemExit(f"vectorsync worker refused to start: {exc}") from None


_refuse_unsupported_kombu()
prepare_environment()  # before any pool process starts
app = Celery("vectorsync", include=["worker.tasks"])
app.add_defaults(_config)


@worker_init.connect
def _share_cores(sender: Any = None, **_: Any) -> None:
    # Before the pool starts: its processes inherit how many of them share the cores (store.calls.threads), so a local
    # model in each takes cores // pool threads. A value already set (several workers on one machine) stays.
    processes = pool_processes(sender)
    if processes is not None:
        os.environ.setdefault(PROCESSES_ENV, str(processes))


def pool_processes(worker: Any) -> int | None:
    """The processes a worker's pool runs tasks in: its concurrency for prefork, 1 for a pool of threads or
    greenlets (one process), None when not yet known (concurrency ``auto``, resolved later)."""
    pool = str(getattr(worker, "pool_cls", "prefork") or "prefork").lower()
    concurrency = getattr(worker, "concurrency", None)
    if not any(name in pool for name in ("prefork", "processes")):
        return 1
    return concurrency if isinstance(concurrency, int) and concurrency > 0 else None


@worker_init.connect
def _say_handover(**_: Any) -> None:
    """Say in one line how the broker hands tasks over (``store.transport.handover``), as a warning where a task
    may be lost."""
    from store.transport.handover import handover

    said = handover(load_settings().broker.url)
    (log.info if said.safe else log.warning)("%s", said.line)


@worker_init.connect
def _upgrade_state(**_: Any) -> None:
    """Bring the state database's schema to this vectorsync's version as the worker starts, before its pool
    forks; workers starting together take turns under the advisory lock (``store.state.database``).

    A schema newer than this vectorsync stops the worker (Celery only logs what a signal handler raises,
    SystemExit aside): its tasks would write rows the newer schema does not expect. A database that cannot
    be reached yet is logged, not fatal: each task opens what it needs.
    """
    try:
        start_state(load_settings())
    except SchemaTooNew as exc:
        log.critical("%s", exc)
        raise SystemExit(f"vectorsync worker refused to start: {exc}") from exc
    except VectorsyncError as exc:
        log.error("could not upgrade the state database at start: %s", exc)


@worker_init.connect
def _preload_clients(**_: Any) -> None:
    """Import the OpenAI client once, before the pool forks, when a model uses it: each pool process (and each
    one that replaces a dead one) would otherwise pay the import in its first task, which on a busy machine
    took most of a short time limit. Only that pure-Python package: torch and ONNX Runtime start threads,
    which a fork must not copy."""
    try:
        if any(model.provider == "openai" for model in load_settings().models.values()):
            importlib.import_module("openai")
    except (VectorsyncError, ImportError) as exc:  # the task that needs it says so
        log.debug("openai not preloaded: %s", exc)


def start_state(settings: Settings) -> None:
    """What a worker's start does to the state database: upgrade it, and say so when it did.

    Raises SchemaTooNew (a newer vectorsync upgraded it), ConfigError, StoreUnavailable.
    """
    from store.state.database import upgrade_state

    upgrade = upgrade_state(settings)
    if upgrade is not None and upgrade.changed:
        log.info(
            "state database at %s: schema upgraded from version %s to %s",
            upgrade.where,
            upgrade.before or "none",
            upgrade.after,
        )


@worker_process_init.connect
def _fresh_process(**_: Any) -> None:
    # A forked pool process must not reuse its parent's connections.
    from worker.runtime.context import reset_context

    reset_context()


@worker_ready.connect
def _create_declared_collections(**_: Any) -> None:
    """Create every declared collection as the worker starts, so a search before the first reindex finds an
    empty collection (the state schema was upgraded at worker_init). Once, in the main process (pool
    processes fork before it).

    A store or state database that cannot be reached yet is logged, not fatal: each task opens what it needs.
    """
    from store.lifecycle import Collections

    try:
        with Collections.from_settings(load_settings()) as collections:
            collections.create_declared()
    except VectorsyncError as exc:
        log.error("could not create the declared collections at start: %s", exc)


@worker_ready.connect
def _look_at_lanes(**_: Any) -> None:
    """Send a look at each running batch-lane run (``worker.runs.lane``): a chain of looks whose worker died
    goes on from here, without waiting for its message's visibility timeout."""
    from store.batches.opened import lanes_running

    try:
        running = lanes_running(load_settings())
    except VectorsyncError as exc:
        log.error("could not read the batch-lane runs at start: %s", exc)
        return
    for run_id in running:
        app.send_task(LANE_TICK, args=(run_id,), kwargs={"token": None}, queue=BULK_QUEUE)


@worker_ready.connect
def _serve_metrics(**_: Any) -> None:
    """Serve the metrics, every series known from the settings at 0 from the first scrape (in this main process,
    which lives as long as the worker: see ``start_series``)."""
    from worker.metrics.gauges import scrape_collectors

    settings = load_settings()
    if settings.worker.metrics_port:
        start_series(settings)
        serve(settings.worker.metrics_port, scrape_collectors(app, settings))


@worker_ready.connect
def _start_relays(**_: Any) -> None:
    """Relay captured changes from the outbox of each SQL source to the broker, in threads of the main process
    (never the pool's: after the fork, like the collections above). ``capture.relay = false`` leaves it to
    ``vectorsync relay``."""
    settings = load_settings()
    if settings.capture.relay:
        from worker.runtime.relays import start_relays

        start_relays(settings)


@worker_shutdown.connect
def _stop_relays(**_: Any) -> None:
    from worker.runtime.relays import stop_relays

    stop_relays()


@worker_shutdown.connect
def _exit_without_teardown(sender: Any = None, **_: Any) -> None:
    """Once a warm shutdown has stopped the consumer and the pool, exit without the interpreter's teardown.

    That teardown is a full garbage collection over the ~200,000 objects of the ~2,000 modules a worker's main
    process holds, about 0.3 s of CPU and nothing else: on a loaded machine it was most of a warm shutdown's
    time after its last task (4.5 of 6.4 s, py-spy in ``gc_collect_main``, two busy loops on 2 cores).
    Only after a shutdown Celery completed (its blueprint terminated) with no pool process left, which a
    worker that failed to start may still have; the logs are flushed first."""
    from billiard.process import active_children
    from celery.bootsteps import TERMINATE

    blueprint = getattr(sender, "blueprint", None)
    if blueprint is None or blueprint.state != TERMINATE or active_children():
        return
    code = sender.exitcode
    log.info("worker stopped: exiting with code %s", code if code is not None else 0)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code if isinstance(code, int) else 0 if code is None else 1)


@worker_process_shutdown.connect
def _process_gone(pid: int | None = None, **_: Any) -> None:
    if pid is not None:
        process_exited(pid)
