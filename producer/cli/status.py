"""``vectorsync status [RUN]``: the workers, the queues and the runs, with stalled runs named and explained, and
each collection's freshness over the last hour (p50 and p95 of the seconds from a change to searchable).

A running run is *stalled* at once when no worker consumes its queue (the
broker says so as it is asked, as ``reindex --wait`` warns at once), and, with
workers consuming it, when its progress has not moved for
``worker.stall_seconds`` and either its queue holds work that nothing takes, or
nothing is queued, running or moving (its messages were lost). The tables fit an 80-column terminal without
cutting a word or a number (``producer.cli.tables``), ids are shown as their shortest unique prefix (at least 8
characters, which ``vectorsync status PREFIX`` accepts), and ``--json`` gives everything in full. Each run shows
the tokens and cost its model calls were counted at (``store.calls.spend``), "estimate" where some tokens are the
estimate.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text

from producer.cli.capture import CAPTURE_COLUMNS, capture_rows
from producer.cli.console import guarded, open_producer, out, say
from producer.cli.progress import index_builds
from producer.cli.safe_text import printable
from producer.cli.tables import Column, show
from store.broker.queues import QueueState, WorkerState
from store.calls.spend import Spent, total
from store.contract import BULK_QUEUE, WORKER_COMMAND, RunStatus

if TYPE_CHECKING:
    from store.broker.freshness_log import Freshness
    from store.capture.control import CaptureState
    from store.state.ledger import RunProgress

__all__ = ["Snapshot", "render", "short_ids", "snapshot", "spent_cells", "stall_reason", "status", "to_json"]

#: Characters of a run id shown at the least.
MIN_ID_CHARS = 8
#: The runs table: the id and the numbers are never wrapped; names, tokens and the start wrap between words. A
#: run's kind is said in its status where it is not a reindex ("reconcile done"): nine columns need ~90 of 80.
RUN_COLUMNS = [
    Column("run", whole=True),
    Column("collection"),
    Column("status"),
    *(Column(header, whole=True) for header in ("progress", "failed")),
    Column("tokens"),
    Column("cost", whole=True),
    Column("started"),  # "12-07 22:40": may wrap between the day and the time, never inside either
]


def status(
    run: Annotated[
        str | None, typer.Argument(help="a run id, or its first characters; recent runs when omitted")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="everything, in full, as JSON")] = False,
) -> None:
    """Show the workers, the queues (depth, oldest message) and the runs; name stalled runs and why."""
    producer = open_producer()
    view = guarded(lambda: snapshot(producer, run_id=run))
    if as_json:
        print(to_json(view))
        return
    render(view)
    for progress, _ in view.runs if run else []:
        tokens, cost = spent_cells(view.spend.get(progress.run_id))
        say(
            f"done {progress.done}, unchanged {progress.skipped}, failed {progress.failed}; tokens {tokens}, "
            f"cost {cost}" + (f"; {printable(progress.error)}" if progress.error else "")
        )


@dataclass(frozen=True)
class Snapshot:
    """What ``status`` shows: workers and queues (None when the broker could not be asked) and runs."""

    workers: list[WorkerState] | None
    queues: list[QueueState] | None
    runs: list[tuple[RunProgress, str | None]]
    broker_error: str = ""
    #: Each captured collection's outbox (``store.capture.control``); its errors are in the rows.
    capture: list[CaptureState] = field(default_factory=list)
    #: Each declared collection's freshness over the last hour (``store.broker.freshness_log``).
    freshness: list[Freshness] = field(default_factory=list)
    #: Why there is none to show (no Redis cache keeps it, or it could not be read); empty otherwise.
    freshness_error: str = ""
    #: What each listed run spent, summed (``Ledger.runs_spend``, one read); a run that spent nothing is absent.
    spend: dict[str, Spent] = field(default_factory=dict)
    #: The index build under way of each ``indexing`` run, by run id (``BuildProgress``, from PostgreSQL).
    builds: dict[str, Any] = field(default_factory=dict)
    #: Each listed batch-lane run's provider jobs (``store.batches.state.Submission``), by run id; and what went
    #: another way than the lane (``store.batches.state.OUTCOMES``).
    jobs: dict[str, list[Any]] = field(default_factory=dict)
    tallies: dict[str, dict[str, int]] = field(default_factory=dict)


def stall_reason(
    run: RunProgress,
    queue: QueueState | None,
    workers: Sequence[WorkerState] | None,
    *,
    stall_seconds: float,
    now: datetime,
) -> str | None:
    """Why ``run`` is stalled, or None when it is not (or the broker could not be asked)."""
    if run.status != RunStatus.RUNNING or queue is None or workers is None:
        return None
    if not queue.consumers:  # nothing can move until a worker starts: no need to wait stall_seconds to say so
        return f"no worker consumes {queue.name}: start one with `{WORKER_COMMAND}`"
    idle = (now - (run.moved_at or run.started_at)).total_seconds()
    if idle < stall_seconds:
        return None
    if queue.depth:
        return (
            f"{queue.name} holds {queue.depth} tasks but nothing moved for {idle:.0f}s: "
            f"check the workers' logs ({', '.join(queue.consumers)})"
        )
    if not any(w.active for w in workers if w.name in queue.consumers):
        return (
            f"nothing is queued or running and nothing moved for {idle:.0f}s: its tasks were lost "
            f"(a broker restart?); `vectorsync reconcile {run.collection}` brings the index back in line"
        )
    return None


def snapshot(producer: Any, *, limit: int = 20, run_id: str | None = None) -> Snapshot:
    """Ask the workers, the broker and the ledger."""
    runs = (
        [producer.reindex_status(producer.ledger.resolve_run(run_id))] if run_id else producer.ledger.recent_runs(limit)
    )
    workers: list[WorkerState] | None = None
    queues: list[QueueState] | None = None
    broker_error = ""
    try:
        workers = producer.workers()
        queues = producer.queues(workers)
    except Exception as exc:  # the runs are still worth showing when the broker is down
        broker_error = f"the broker cannot be asked ({type(exc).__name__}: {exc}); check broker.url"
    bulk = next((q for q in queues or [] if q.name == BULK_QUEUE), None)
    now = datetime.now(UTC)
    stall = producer.settings.worker.stall_seconds
    spent = producer.ledger.runs_spend([r.run_id for r in runs])
    jobs, tallies = _lanes(producer, runs)
    return Snapshot(
        workers,
        queues,
        [(r, stall_reason(r, bulk, workers, stall_seconds=stall, now=now)) for r in runs],
        broker_error,
        _capture(producer.settings),
        *_freshness(producer.settings),
        spend={run_id: total(rows) for run_id, rows in spent.items()},
        builds=index_builds(producer.settings, runs),
        jobs=jobs,
        tallies=tallies,
    )


def _lanes(producer: Any, runs: Sequence[RunProgress]) -> tuple[dict[str, list[Any]], dict[str, dict[str, int]]]:
    """Each batch-lane run's jobs, and its tally."""
    laned = [run.run_id for run in runs if run.lane == "batch"]
    if not laned:
        return {}, {}
    from store.batches.opened import lane_state

    state = lane_state(producer.ledger)
    return {run_id: state.submissions(run_id) for run_id in laned}, {run_id: state.tallies(run_id) for run_id in laned}


def _freshness(settings: Any) -> tuple[list[Freshness], str]:
    from store.broker.freshness_log import FreshnessLog

    kept = FreshnessLog(settings.cache_url, network=settings.network)
    try:
        if not kept.kept:
            return [], "freshness is kept in the cache's Redis, and cache.url is not a Redis"
        return [kept.recent(name) for name in sorted(settings.collections)], ""
    except Exception as exc:  # status still shows the rest
        return [], f"freshness could not be read ({type(exc).__name__}: {exc})"
    finally:
        kept.close()


def _capture(settings: Any) -> list[CaptureState]:
    from store.capture.control import CaptureState, report

    try:
        return report(settings)
    except Exception as exc:  # status still shows the rest
        return [CaptureState("-", True, error=f"capture could not be read: {exc}")]


def short_ids(ids: Sequence[str]) -> dict[str, str]:
    """The shortest prefix of each id, at least ``MIN_ID_CHARS`` long, that no other id shares."""
    shown = {}
    for run_id in ids:
        size = MIN_ID_CHARS
        while size < len(run_id) and any(o != run_id and o.startswith(run_id[:size]) for o in ids):
            size += 1
        shown[run_id] = run_id[:size]
    return shown


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.0f}s"
    return f"{seconds / 60:.0f}m" if seconds < 7200 else f"{seconds / 3600:.0f}h"


def render(view: Snapshot) -> None:
    """Print the snapshot as tables; data is printed literally (never read as markup)."""
    _render_broker(view)
    _render_runs(view)
    _render_builds(view)
    _render_jobs(view)
    if view.capture:
        show(out, [Column("captured"), *CAPTURE_COLUMNS[1:]], capture_rows(view.capture), empty="")
    _render_freshness(view)


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}s"


def _render_freshness(view: Snapshot) -> None:
    """Collections with changes made searchable in the last hour; the others are left out."""
    if view.freshness_error:
        say(printable(view.freshness_error))
    changed = [f for f in view.freshness if f.changes]
    if not changed:
        return
    columns = [Column("collection"), *(Column(h, whole=True) for h in ("changes (1h)", "fresh p50", "fresh p95"))]
    show(out, columns, [(f.collection, str(f.changes), _seconds(f.p50), _seconds(f.p95)) for f in changed], empty="")


def _render_broker(view: Snapshot) -> None:
    if view.workers is not None:
        show(
            out,
            [Column("worker"), Column("queues"), Column("active", whole=True)],
            [(w.name, ", ".join(w.queues) or "-", str(w.active)) for w in view.workers],
            empty=f"no worker answers: start one with `{WORKER_COMMAND}`",
        )
    if view.queues is not None:
        show(
            out,
            [Column("queue"), *(Column(header, whole=True) for header in ("waiting", "oldest", "consumers"))],
            [(q.name, str(q.depth), _age(q.oldest_seconds), str(len(q.consumers))) for q in view.queues],
            empty="no queues: the broker holds none of vectorsync's yet",
        )
    if view.broker_error:
        say(printable(view.broker_error))


def spent_cells(spent: Spent | None) -> tuple[str, str]:
    """A run's tokens ("estimate" after them where the count is the estimate) and cost ("-" without a price)."""
    if spent is None:
        return "0", "-"
    tokens = f"{spent.tokens:,}" + (" estimate" if spent.estimated else "")
    return tokens, "-" if spent.cost is None else f"{spent.cost:.4f}"


def _render_runs(view: Snapshot) -> None:
    ids = short_ids([r.run_id for r, _ in view.runs])
    rows = []
    for run, stalled in view.runs:
        progress = f"{run.processed}/{run.total if run.total is not None else '?'}"
        rows.append(
            (
                ids[run.run_id],  # an id is what a reader copies: whole, as every number here
                run.collection,
                _kind_and(run.kind, Text("stalled", style="red") if stalled else Text(str(run.status))),
                progress,
                str(run.failed),
                *spent_cells(view.spend.get(run.run_id)),
                run.started_at.strftime("%m-%d %H:%M"),
            )
        )
    show(out, RUN_COLUMNS, rows, empty="no runs yet: `vectorsync reindex NAME` starts one")
    for run, stalled in view.runs:
        if stalled:
            say(f"{_run(run, ids)} is stalled: {printable(stalled)}")
        elif run.status == RunStatus.PAUSED:
            say(f"{_run(run, ids)} is {printable(run.error or 'paused')}")


def _kind_and(kind: str, status: Text) -> Text:
    """A run's status, after its kind where that is not the usual reindex."""
    return status if kind == "reindex" else Text.assemble(f"{kind} ", status)


def _render_builds(view: Snapshot) -> None:
    """Each ``indexing`` run's index build: its phase and how far, as PostgreSQL reports it."""
    ids = short_ids([r.run_id for r, _ in view.runs])
    for run, _ in view.runs:
        build = view.builds.get(run.run_id)
        if build is not None:
            say(f"{_run(run, ids)} builds its index: {printable(build.describe())}")


def _render_jobs(view: Snapshot) -> None:
    """Each batch-lane run's jobs at the provider: state, lines done and failed of all, age."""
    ids, now = short_ids([r.run_id for r, _ in view.runs]), datetime.now(UTC)
    for run, _ in view.runs:
        for job in view.jobs.get(run.run_id, []):
            age = _age((now - job.submitted_at).total_seconds() if job.submitted_at else None)
            say(
                f"{_run(run, ids)} batch job {printable(job.job_id or job.tag)}: {printable(job.status)}, "
                f"{job.completed} of {job.lines} lines done, {job.failed} failed, {age} old"
            )
        tally = view.tallies.get(run.run_id)
        if tally:
            from store.batches.state import OUTCOMES

            said = ", ".join(f"{tally[outcome]:,} {what}" for outcome, what in OUTCOMES.items() if outcome in tally)
            say(f"{_run(run, ids)} through another way than its batch lane: {said}")


def _run(run: RunProgress, ids: dict[str, str]) -> str:
    """``run ID (COLLECTION)``, as a line names a run: its short id, escaped."""
    return f"run {printable(ids[run.run_id])} ({printable(run.collection)})"


def to_json(view: Snapshot) -> str:
    """The snapshot in full, as JSON."""

    def run(progress: RunProgress, stalled: str | None) -> dict[str, Any]:
        data = asdict(progress)
        spent = view.spend.get(progress.run_id, Spent())
        data.update(processed=progress.processed, stalled=stalled, spend=dict(asdict(spent), estimate=spent.estimated))
        return data

    data = {
        "workers": None if view.workers is None else [asdict(w) for w in view.workers],
        "queues": None if view.queues is None else [asdict(q) for q in view.queues],
        "broker_error": view.broker_error or None,
        "runs": [run(r, s) for r, s in view.runs],
        "capture": [dict(asdict(c), problem=c.problem) for c in view.capture],
        "freshness": [asdict(f) for f in view.freshness],
        "freshness_error": view.freshness_error or None,
        "index_builds": {run_id: asdict(build) for run_id, build in view.builds.items()},
        "batch_jobs": {run_id: [asdict(job) for job in jobs] for run_id, jobs in view.jobs.items()},
        "batch_tally": view.tallies,
    }
    return json.dumps(data, default=str, indent=2)
