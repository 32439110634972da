"""What a worker's metrics endpoint reads at each scrape: the broker's queues, the state database's runs and
failures, the capture outboxes.

Gauges, not counters: each is what the broker or the state database says now, asked by the worker's main
process when Prometheus scrapes it. Every worker serves the same values, so dashboards and alert rules take
``max by (...)`` over them. A broker or database that cannot be asked leaves its gauges out of that scrape
(logged), never fails it.

- ``vectorsync_queue_depth``, ``vectorsync_queue_oldest_seconds``, ``vectorsync_queue_consumers`` {queue}:
  ``consumers == 0`` while ``depth > 0`` is the alert "work queued, nobody consuming";
- ``vectorsync_runs`` {status}: runs in each state (running, indexing, done, failed, paused);
- ``vectorsync_run_idle_seconds`` {collection}: for a collection with a running run, the seconds since the
  progress of the least recently moved one last moved (``vectorsync status`` calls a run stalled from it);
- ``vectorsync_run_progress`` {collection}: the newest running run's records processed over its total, 0 to 1
  (once its total is known);
- ``vectorsync_failed_records`` {collection}: records in the failures table (``vectorsync failures``);
- ``vectorsync_capture_pending``, ``vectorsync_capture_lag_seconds`` {collection}: each captured collection's
  outbox (``CaptureLag``);
- ``vectorsync_freshness_target_seconds`` {collection}: the freshness p95 the alert rule holds it to, from the
  settings (``FreshnessTarget``), so the rule compares with the deployment's own target;
- ``vectorsync_drifted_records`` {collection}: what the last sampled verify found (``VerifyGauges``; NaN for a
  collection not yet verified).

Once the ledger answers, every run state and every declared collection has its series: 0 runs, 0 failed
records, and NaN idle seconds and progress for a collection with no running run (0 would say a run is there,
moving, at its start), as Prometheus's instrumentation guide advises for a value that 0 would misstate.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from store.contract import RunStatus

if TYPE_CHECKING:
    from celery import Celery

    from store.capture.control import CaptureState
    from store.settings import Settings
    from store.state.ledger import Ledger, Overview
    from store.verify.verdicts import Verdicts

__all__ = [
    "CONSUMERS_TIMEOUT",
    "CaptureLag",
    "FreshnessTarget",
    "LedgerGauges",
    "QueueGauges",
    "VerifyGauges",
    "run_gauges",
    "scrape_collectors",
]

log = logging.getLogger(__name__)
#: Seconds the workers get to say which queues they consume, at each scrape.
CONSUMERS_TIMEOUT = 1.0


def scrape_collectors(app: Celery, settings: Settings) -> list[Any]:
    """What a worker's metrics endpoint reads at each scrape, from ``settings``: the queues, the freshness targets
    and the last verdicts always; the capture outboxes when a collection is captured; the runs and failures
    unless a memory store with no state database keeps them in each pool process (nothing to read here)."""
    from store.capture import captured
    from store.capture.control import report
    from store.state.ledger import in_process_only, ledger_from_settings
    from store.verify.verdicts import Verdicts
    from worker.metrics.series import known_labels

    known = known_labels(settings)
    collectors: list[Any] = [
        QueueGauges(app, settings.broker.url, known.queues),
        FreshnessTarget(known.collections, known.freshness_target),
        VerifyGauges(lambda: Verdicts(settings.cache_url, network=settings.network), known.collections),
    ]
    if captured(settings):
        collectors.append(CaptureLag(lambda: report(settings)))
    if not in_process_only(settings):
        collectors.append(LedgerGauges(lambda: ledger_from_settings(settings), collections=known.collections))
    return collectors


class FreshnessTarget:
    """Each declared collection's freshness target (``worker.freshness_target_seconds``), a constant."""

    def __init__(self, collections: Iterable[str], seconds: float) -> None:
        self.collections, self.seconds = tuple(collections), seconds

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        target = GaugeMetricFamily(
            "vectorsync_freshness_target_seconds",
            "The p95 freshness each collection is held to (worker.freshness_target_seconds)",
            labels=["collection"],
        )
        for name in self.collections:
            target.add_metric([name], self.seconds)
        yield target


class VerifyGauges:
    """Each declared collection's drifted records, from its last sampled verify (``store.verify.verdicts``)."""

    def __init__(self, open_verdicts: Callable[[], Verdicts], collections: Iterable[str]) -> None:
        self.open_verdicts, self.collections = open_verdicts, tuple(collections)
        self._verdicts: Verdicts | None = None

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        drifted = GaugeMetricFamily(
            "vectorsync_drifted_records",
            "Records the last sampled verify found drifted from the ledger, orphans included (NaN: not yet verified)",
            labels=["collection"],
        )
        try:
            if self._verdicts is None:
                self._verdicts = self.open_verdicts()
            for name in self.collections:
                verdict = self._verdicts.last(name)
                drifted.add_metric([name], math.nan if verdict is None else float(verdict.drifted))
        except Exception as exc:  # a scrape must not fail because Redis is down
            log.warning("verify metrics unavailable: %s", exc)
            return
        yield drifted


class QueueGauges:
    """Each queue's depth, the age of its oldest message and its consumers, asked when scraped."""

    def __init__(self, app: Celery, broker_url: str, queues: tuple[str, ...]) -> None:
        #: The worker's Celery app, which broadcasts the ask for consumers (passed in: this module never
        #: imports ``worker.runtime.app``, which imports it).
        self.app = app
        self.broker_url = broker_url
        self.queues = queues

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        from store.broker.queues import queue_states, worker_states

        depth = GaugeMetricFamily("vectorsync_queue_depth", "Tasks waiting in each queue", labels=["queue"])
        oldest = GaugeMetricFamily(
            "vectorsync_queue_oldest_seconds",
            "Age of the oldest task waiting in each queue (0 when empty)",
            labels=["queue"],
        )
        consumers = GaugeMetricFamily("vectorsync_queue_consumers", "Workers consuming each queue", labels=["queue"])
        try:
            workers = worker_states(self.app, timeout=CONSUMERS_TIMEOUT, active=False)
            states = queue_states(self.broker_url, self.queues, workers)
        except Exception as exc:  # a scrape must not fail because the broker is down
            log.warning("queue metrics unavailable: %s", exc)
            states = []
        for state in states:
            depth.add_metric([state.name], float(state.depth))
            oldest.add_metric([state.name], float(state.oldest_seconds or 0.0))
            consumers.add_metric([state.name], float(len(state.consumers)))
        yield from (depth, oldest, consumers)


class CaptureLag:
    """Each captured collection's outbox, asked when scraped: rows waiting and the age of the oldest.

    ``vectorsync_capture_lag_seconds`` rising means changes are written but not relayed (no worker runs the
    relay, or the broker is down); 0 when nothing waits.
    """

    def __init__(self, report: Callable[[], list[CaptureState]]) -> None:
        self.report = report

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        pending = GaugeMetricFamily(
            "vectorsync_capture_pending", "Captured changes waiting in the outbox", labels=["collection"]
        )
        lag = GaugeMetricFamily(
            "vectorsync_capture_lag_seconds",
            "Age of the oldest captured change waiting in the outbox (0 when none waits)",
            labels=["collection"],
        )
        try:
            states = self.report()
        except Exception as exc:  # a scrape must not fail because a source database is down
            log.warning("capture metrics unavailable: %s", exc)
            states = []
        for state in states:
            if state.error is None:
                pending.add_metric([state.collection], float(state.pending))
                lag.add_metric([state.collection], float(state.lag_seconds or 0.0))
        yield from (pending, lag)


def run_gauges(overview: Overview, *, now: datetime, collections: Iterable[str] = ()) -> dict[str, dict[str, float]]:
    """The values of the run and failure gauges, by metric and label value, each of ``collections`` (the
    declared ones) and each run state included (see the module docstring)."""
    idle: dict[str, float] = {}
    progress: dict[str, float] = {}
    for run in overview.open_runs:  # newest first
        if run.status != RunStatus.RUNNING:
            continue
        seconds = max((now - (run.moved_at or run.started_at)).total_seconds(), 0.0)
        idle[run.collection] = max(idle.get(run.collection, 0.0), seconds)
        if run.total and run.collection not in progress:
            progress[run.collection] = min(run.processed / run.total, 1.0)
    known = dict.fromkeys(collections, math.nan)
    return {
        "vectorsync_runs": dict.fromkeys(map(str, RunStatus), 0.0)
        | {str(status): float(count) for status, count in overview.runs.items()},
        "vectorsync_run_idle_seconds": known | idle,
        "vectorsync_run_progress": known | progress,
        "vectorsync_failed_records": dict.fromkeys(collections, 0.0)
        | {name: float(count) for name, count in overview.failures.items()},
    }


#: (help, label) of each run and failure gauge.
_RUN_GAUGES = {
    "vectorsync_runs": ("Runs in each state", "status"),
    "vectorsync_run_idle_seconds": (
        "Seconds since the progress of a collection's running run last moved (the longest, when several run)",
        "collection",
    ),
    "vectorsync_run_progress": ("Records processed over the total of a collection's newest running run", "collection"),
    "vectorsync_failed_records": ("Records of each collection in the failures table", "collection"),
}


class LedgerGauges:
    """Runs per state, open runs' idle time and progress, failed records: the ledger's ``overview()`` when
    scraped, with a series for each of ``collections`` (the declared ones). The ledger is opened at the first
    scrape and kept; one that fails is opened again at the next."""

    def __init__(self, open_ledger: Callable[[], Ledger], *, collections: tuple[str, ...] = ()) -> None:
        self.open_ledger = open_ledger
        self.collections = collections
        self._ledger: Ledger | None = None

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        values: dict[str, dict[str, float]] = {name: {} for name in _RUN_GAUGES}
        try:
            if self._ledger is None:
                self._ledger = self.open_ledger()
            values = run_gauges(self._ledger.overview(), now=datetime.now(UTC), collections=self.collections)
        except Exception as exc:  # a scrape must not fail because the state database is down
            log.warning("run metrics unavailable: %s", exc)
            self._close()
        for name, (help_text, label) in _RUN_GAUGES.items():
            family = GaugeMetricFamily(name, help_text, labels=[label])
            for key, value in sorted(values[name].items()):
                family.add_metric([key], value)
            yield family

    def _close(self) -> None:
        ledger, self._ledger = self._ledger, None
        if ledger is not None:
            try:
                ledger.close()
            except Exception as exc:  # closing a broken ledger: nothing more to do
                log.debug("closing the ledger after a failed scrape: %s", exc)
