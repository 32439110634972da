"""Every benchmark target, defined once: the sections judge their rows by it, ``bench.headline`` judges the
saved rows by it again (a target changed after a run changes the verdict, not the figure), and the docs' tables
are rendered from those rows.

A ratio target (unit starting with ``x``) judges a row's ``ratio``; any other judges its ``value``.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TypedDict

from bench.report import Row

__all__ = ["TARGETS", "Judged", "Target", "judged", "rejudge"]

_OPS: dict[str, Callable[[float, float], bool]] = {
    "==": operator.eq,
    ">=": operator.ge,
    "<=": operator.le,
    "<": operator.lt,
    "~": lambda value, bound: math.isclose(value, bound, rel_tol=0.01),  # within 1%
}


@dataclass(frozen=True)
class Target:
    """``op bound unit``, e.g. ``>= 0.8x COPY+build``: ``note`` says what a ratio is taken against; ``says``, when
    set, is the whole text (``equal`` for a yes-or-no figure of 1 or 0)."""

    op: str
    bound: float
    unit: str = ""
    note: str = ""
    says: str = ""

    def text(self) -> str:
        return self.says or f"{self.op} {self.bound:g}{self.unit}" + (f" {self.note}" if self.note else "")

    def met(self, value: float) -> bool:
        return _OPS[self.op](value, self.bound)

    def judges(self, row: Row) -> float | None:
        """The figure of ``row`` this target is about."""
        return row.ratio if self.unit.startswith("x") else row.value


#: Measure -> its target (the issue that set it in the comment).
TARGETS: dict[str, Target] = {
    # Issue 1: search recall@10 against an exact search of the same rows, and its p95 by collection size.
    "search recall": Target(">=", 0.95),
    "filtered recall": Target(">=", 0.99),
    "search p95, up to 100,000 vectors": Target("<=", 15, " ms"),
    "search p95, 1,000,000 vectors": Target("<=", 50, " ms"),
    # Issue 35: the bulk first index against a raw binary COPY of its final rows plus the same index builds.
    "first index against the limit": Target(">=", 0.8, "x", "COPY+build"),
    # The first index against LangChain's index() + PGVector on the same data, embedder and server (records/s).
    "first index against the peer": Target(">=", 3, "x"),
    "live update p95 under a reindex": Target("<", 1, " s"),
    "provider calls against the ideal": Target("<=", 1.02, "x"),
    "local model against raw encode": Target(">=", 0.85, "x"),
    "capture freshness p95": Target("<=", 1, " s"),
    "writes with the capture trigger": Target(">=", 0.8, "x"),
    "peak worker RSS": Target("<", 400, " MiB"),
    # Issue 20: hybrid's p95 at most twice vector's at 100,000 chunks.
    "hybrid p95 against vector": Target("<=", 2, "x vector"),
    # A phase's per-record cost at the largest size against the smallest.
    "per-record growth": Target("<=", 1.2, "x"),
    # The bill: every count of a plan (records, calls, tokens) is the count its run then made (1 when equal).
    "plan against its run": Target("==", 1, says="equal"),
    # Issue 50: a capped load paused and resumed buys each text once: texts embedded against the chunks stored.
    "pause and resume against one load": Target("<=", 1.01, "x", "chunks stored"),
    # verify's peak memory at 1,000,000 chunks against 100,000: bounded.
    "verify memory growth": Target("<=", 1.1, "x", "(bounded memory)"),
    # The batch lane: a first load's cost through it against the same load through the chain, the same tokens at
    # the declared prices (0.01 and 0.02 a million): their ratio, within 1%.
    "batch lane cost against the sync lane": Target("~", 0.5, "x", says="0.5x ± 1% (the prices' ratio)"),
}


class Judged(TypedDict):
    """A row's fields that say what it is judged by and how it did: ``Row(..., **judged(measure, figure))``."""

    measure: str
    target: str
    ok: bool


def judged(measure: str, figure: float) -> Judged:
    """The ``measure``, ``target`` and ``ok`` fields of a row whose judged figure is ``figure``."""
    target = TARGETS[measure]
    return {"measure": measure, "target": target.text(), "ok": target.met(figure)}


def rejudge(row: Row) -> Row:
    """``row`` with its target and verdict as ``TARGETS`` says today; rows of no measure stay as they are."""
    target = TARGETS.get(row.measure)
    figure = None if target is None else target.judges(row)
    if target is None or figure is None:
        return row
    return replace(row, target=target.text(), ok=target.met(figure))
