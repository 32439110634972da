"""What one ``scale`` run measured (``Measured``, one per size) and how it is reported: the rows of the bench's
table, each phase's growth from the smallest size to the largest with what bounds it, and the curve."""

from __future__ import annotations

from dataclasses import dataclass, field

from bench.report import Row
from bench.targets import judged

__all__ = [
    "EDITS",
    "INSERTED",
    "PHASES",
    "SHORT_BUILD_LIMIT",
    "Measured",
    "PastLimit",
    "rows_of",
    "series_of",
]

#: With the extras, a first load runs with worker.index_time_limit SHORT_BUILD_LIMIT seconds, less than its HNSW
#: build takes: it must end once, done or failed, its build's progress shown by `status`.
SHORT_BUILD_LIMIT = 15
#: Records whose chunks one INSERT writes again, for what the HNSW-indexed table's writes cost at each size.
INSERTED = 200
#: Phases whose per-record cost is over the edited records, not all of them.
EDITS = ("1% edit", "capture burst")
PHASES = ("first index", "limit", "unchanged", "1% edit", "reconcile", "capture burst")


@dataclass
class PastLimit:
    """How a first load whose build outlasted ``worker.index_time_limit`` went."""

    status: str
    error: str
    build_tasks: int
    builds_started: int
    progress: list[str]
    seconds: float


@dataclass
class Measured:
    """One size's figures: seconds per phase, and what the parts held."""

    records: int
    chunks: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    worker_rss: dict[str, int] = field(default_factory=dict)
    redis_peak: int = 0
    table_bytes: int = 0
    state_bytes: int = 0
    keywords_first: float | None = None
    past_limit: PastLimit | None = None
    #: CPU seconds of a phase: the bench's process tree (the workers, Redis, the bench), and PostgreSQL's.
    cpu: dict[str, tuple[float, float]] = field(default_factory=dict)
    #: Seconds of the first index's own index builds (its build_index tasks).
    own_build: float = 0.0
    #: Seconds per chunk of one INSERT of INSERTED records' chunks into the HNSW-indexed table.
    insert_per_chunk: float = 0.0

    @property
    def loading(self) -> float:
        """Seconds of the first index before its own index builds."""
        return self.seconds["first index"] - self.own_build

    def per_record(self, phase: str, seconds: float | None = None) -> float:
        edited = max(1, self.records // 100)
        return (self.seconds[phase] if seconds is None else seconds) / (edited if phase in EDITS else self.records)


def rows_of(measured: list[Measured]) -> list[Row]:
    rows = []
    for m in measured:
        section = f"scale {m.records:,}"
        for phase in PHASES:
            seconds = m.seconds[phase]
            unit = "edited record" if phase in EDITS else "record"
            rows.append(Row(section, phase, seconds, "s", detail=f"{m.per_record(phase) * 1e6:,.0f} us per {unit}"))
        ratio = m.seconds["limit"] / m.seconds["first index"]
        rows.append(
            Row(
                section,
                f"first index of {m.records:,} records ({m.chunks:,} chunks) against the limit",
                ratio,
                "x",
                ratio=ratio,
                **judged("first index against the limit", ratio),
            )
        )
        for part in ("limit: COPY", "limit: index builds"):
            if part in m.seconds:  # not in runs before the split was kept
                rows.append(
                    Row(section, part, m.seconds[part], "s", detail=f"of the limit's {m.seconds['limit']:.1f} s")
                )
        rows += bound_rows(section, m)
        for command in ("status", "doctor"):
            rows.append(Row(section, f"vectorsync {command}: wall", m.seconds[command], "s"))
        peak = max(m.worker_rss.values())
        rows.append(
            Row(
                section,
                "peak worker RSS (any process of either worker)",
                peak / 2**20,
                "MiB",
                **judged("peak worker RSS", peak / 2**20),
                detail=", ".join(f"{name} {rss / 2**20:.0f} MiB" for name, rss in sorted(m.worker_rss.items())),
            )
        )
        rows.append(Row(section, "Redis used_memory_peak", m.redis_peak / 2**20, "MiB"))
        rows.append(Row(section, "PostgreSQL bytes per chunk (table and its indexes)", m.table_bytes / m.chunks, "B"))
        rows.append(Row(section, "state tables (ledger, runs, spend, ...)", m.state_bytes / 2**20, "MiB"))
        if m.keywords_first is not None:
            ratio = m.keywords_first / m.seconds["first index"]
            rows.append(
                Row(
                    section,
                    "first index with keyword indexing on (search.keywords) / off",
                    m.keywords_first,
                    "s",
                    ratio=ratio,
                    detail=f"off {m.seconds['first index']:.1f} s: keyword indexing costs the bulk path {ratio:.2f}x",
                )
            )
        if m.past_limit is not None:
            slow = m.past_limit
            shown = slow.progress[-1] if slow.progress else "nothing"
            rows.append(
                Row(
                    section,
                    f"first load, HNSW build past index_time_limit = {SHORT_BUILD_LIMIT} s: ended {slow.status}",
                    slow.builds_started,
                    "HNSW builds started",
                    target="ends once, the build started once, its progress shown",
                    ok=slow.status in ("done", "failed") and slow.builds_started == 1 and bool(slow.progress),
                    detail=f"{slow.seconds:.0f} s; {slow.build_tasks} build tasks; {len(slow.progress)} status lines "
                    f"showed the build, the last: {shown!r}; the run's error: {slow.error!r}",
                )
            )
    if len(measured) > 1:
        small, large = measured[0], measured[-1]
        for phase in PHASES:
            growth = large.per_record(phase) / small.per_record(phase)
            rows.append(
                Row(
                    "scale growth",
                    f"{phase}: per-record cost at {large.records:,} / at {small.records:,}",
                    growth,
                    "x",
                    ratio=growth,
                    **judged("per-record growth", growth),
                )
            )
        for part in ("limit: COPY", "limit: index builds"):
            if part in small.seconds and part in large.seconds:
                growth = (large.seconds[part] / large.records) / (small.seconds[part] / small.records)
                rows.append(
                    Row(
                        "scale growth",
                        f"{part}: per-record cost at {large.records:,} / at {small.records:,}",
                        growth,
                        "x",
                    )
                )
        rows += bound_growth(small, large)
        redis_growth = large.redis_peak / small.redis_peak
        rows.append(
            Row(
                "scale growth",
                f"Redis used_memory_peak at {large.records:,} / at {small.records:,}",
                redis_growth,
                "x",
                ratio=redis_growth,
                target="bounded",
            )
        )
    return rows


def bound_rows(section: str, m: Measured) -> list[Row]:
    """What bounds the first index and the edits at one size: CPU seconds, the pipeline's own build, and what
    an INSERT into the HNSW-indexed table costs."""
    ours, postgres = m.cpu["first index"]
    limit = sum(m.cpu["limit"])
    rows = [
        Row(
            section,
            "first index: CPU seconds, all processes (the limit's in the detail)",
            ours + postgres,
            "CPU s",
            ratio=limit / (ours + postgres),
            detail=f"workers, Redis and the bench {ours:.1f} s ({ours / m.records * 1e6:,.0f} us per record), "
            f"PostgreSQL {postgres:.1f} s ({postgres / m.records * 1e6:,.0f} us per record); the limit {limit:.1f} s: "
            f"limit / first index in CPU seconds {limit / (ours + postgres):.3f}",
        ),
        Row(
            section,
            "first index: its own index builds (build_index)",
            m.own_build,
            "s",
            detail=f"loading before them {m.loading:.1f} s ({m.loading / m.records * 1e6:,.0f} us per record); "
            f"the limit's builds {m.seconds['limit: index builds']:.1f} s",
        ),
    ]
    for phase in ("1% edit", "capture burst"):
        ours, postgres = m.cpu[phase]
        rows.append(
            Row(
                section,
                f"{phase}: CPU per edited record",
                m.per_record(phase, ours + postgres) * 1e3,
                "CPU ms",
                detail=f"workers, Redis and the bench {m.per_record(phase, ours) * 1e3:.2f} ms, "
                f"PostgreSQL {m.per_record(phase, postgres) * 1e3:.2f} ms",
            )
        )
    rows.append(
        Row(
            section,
            f"INSERT of {INSERTED} records' chunks into the HNSW-indexed table (EXPLAIN ANALYZE)",
            m.insert_per_chunk * 1e6,
            "us per chunk",
        )
    )
    return rows


def bound_growth(small: Measured, large: Measured) -> list[Row]:
    """How the measures of ``bound_rows`` grow from the smallest size to the largest."""
    name = f"per-record cost at {large.records:,} / at {small.records:,}"
    pairs = {
        "first index, CPU seconds of the workers, Redis and the bench": (
            large.cpu["first index"][0] / large.records,
            small.cpu["first index"][0] / small.records,
        ),
        "first index, CPU seconds of PostgreSQL": (
            large.cpu["first index"][1] / large.records,
            small.cpu["first index"][1] / small.records,
        ),
        "first index, loading before its own index builds": (
            large.loading / large.records,
            small.loading / small.records,
        ),
        "first index, its own index builds": (large.own_build / large.records, small.own_build / small.records),
    }
    for phase in ("1% edit", "capture burst"):
        for part, label in ((0, "of the workers, Redis and the bench"), (1, "of PostgreSQL")):
            pairs[f"{phase}, CPU seconds {label}"] = (
                large.per_record(phase, large.cpu[phase][part]),
                small.per_record(phase, small.cpu[phase][part]),
            )
    pairs["INSERT into the HNSW-indexed table, per chunk"] = (large.insert_per_chunk, small.insert_per_chunk)
    return [
        Row("scale growth", f"{label}: {name}", big / little, "x", ratio=big / little)
        for label, (big, little) in pairs.items()
        if little > 0
    ]


def series_of(measured: list[Measured]) -> dict[str, list[tuple[int, float]]]:
    """Phase -> [(records, microseconds per record)], what ``bench.pictures.draw_scale`` draws."""
    return {phase: [(m.records, m.per_record(phase) * 1e6) for m in measured] for phase in PHASES}
