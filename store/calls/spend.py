"""Spend as the provider counts it: tokens, calls and cost of the model calls made for a batch, per run,
collection, model and generation.

A worker tallies a batch (``tallied(run_id)``) and names, around each generation's work, what the calls are
for (``charged_to(collection, generation)``); the embedding chain adds each call (``add``); the worker then
writes the tally to the state database once (``Ledger.add_spend``). Both are context variables, so parallel
tasks in one process never mix; the embedding threads of a call see them through ``contextvars.copy_context``.
A call made outside a tally (an app's query) is counted by Prometheus only (``store.calls.accounting``).

Tokens are the provider's ``usage`` where it reports one ("provider"), else the model's tokenizer
("tokenizer") or the estimate ("estimate"): ``store.calls.tokens``. A sum keeps the weakest label.

A run's caps are checked against these sums before each call is sent: ``store.calls.caps``.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from store.calls.tokens import ESTIMATE, TokenCounter, token_counter

if TYPE_CHECKING:
    from store.settings import ModelSettings

__all__ = [
    "LIVE",
    "UNMETERED",
    "Meter",
    "Spend",
    "SpendCountedBy",
    "Spent",
    "Tally",
    "add",
    "batch_spent",
    "charged_to",
    "cost_of",
    "measured",
    "tallied",
    "total",
    "weakest",
]

#: How a spend's tokens were counted, strongest first.
SpendCountedBy = Literal["provider", "tokenizer", "estimate"]
_STRENGTH: dict[str, int] = {"provider": 0, "tokenizer": 1, "estimate": 2}
#: The run id of spend outside a run: live ``index_record`` tasks and pushed documents.
LIVE = ""


def weakest(first: SpendCountedBy, second: SpendCountedBy) -> SpendCountedBy:
    """The label of a sum of counts labelled ``first`` and ``second``: an estimate in it makes it one."""
    return first if _STRENGTH[first] >= _STRENGTH[second] else second


def cost_of(tokens: int, price_per_million_tokens: float | None) -> float | None:
    """What ``tokens`` cost at a price per million; None when no price is declared."""
    return None if price_per_million_tokens is None else tokens * price_per_million_tokens / 1_000_000


@dataclass(frozen=True, slots=True)
class Meter:
    """How one model entry's calls are counted: its token counter, for calls whose provider reports no
    tokens, and its declared price."""

    counter: TokenCounter = ESTIMATE
    price_per_million_tokens: float | None = None

    @classmethod
    def of(cls, model: ModelSettings) -> Meter:
        return cls(token_counter(model), model.price_per_million_tokens)

    def measure(self, texts: list[str], reported: int | None) -> tuple[int, SpendCountedBy, float | None]:
        """A call's tokens (``reported`` by the provider, else counted), how they were counted, and the cost."""
        if reported is not None:
            return reported, "provider", cost_of(reported, self.price_per_million_tokens)
        tokens = self.counter.total(texts)
        return tokens, self.counter.counted_by, cost_of(tokens, self.price_per_million_tokens)


#: The meter of an entry built without settings: the estimate, no price.
UNMETERED = Meter()


@dataclass(frozen=True, slots=True, kw_only=True)
class Spend:
    """Calls of one model for one run (``LIVE``: none), collection and generation, summed."""

    run_id: str
    collection: str
    model: str
    generation: int
    tokens: int
    calls: int
    #: None when the model declares no price (``[models.NAME] price_per_million_tokens``).
    cost: float | None
    counted_by: SpendCountedBy

    @property
    def key(self) -> tuple[str, str, str, int]:
        return (self.run_id, self.collection, self.model, self.generation)

    def plus(self, other: Spend) -> Spend:
        """Both sums; a cost stays None only when neither has one."""
        cost = None if self.cost is None and other.cost is None else (self.cost or 0.0) + (other.cost or 0.0)
        return replace(
            self,
            tokens=self.tokens + other.tokens,
            calls=self.calls + other.calls,
            cost=cost,
            counted_by=weakest(self.counted_by, other.counted_by),
        )


@dataclass(frozen=True, slots=True)
class Spent:
    """Spend summed over its models and generations: what ``status`` shows of a run, and a budget compares."""

    tokens: int = 0
    calls: int = 0
    #: None when no call had a declared price.
    cost: float | None = None
    counted_by: SpendCountedBy = "provider"

    @property
    def estimated(self) -> bool:
        """Whether some of the tokens are the estimate (four characters a token), not a count."""
        return self.counted_by == "estimate"


def total(rows: Iterable[Spend]) -> Spent:
    """The sum of ``rows`` (``Ledger.run_spend``); nothing spent is ``Spent()``."""
    summed = Spent()
    for row in rows:
        cost = summed.cost if row.cost is None else (summed.cost or 0.0) + row.cost
        summed = Spent(
            summed.tokens + row.tokens, summed.calls + row.calls, cost, weakest(summed.counted_by, row.counted_by)
        )
    return summed


class Tally:
    """One batch's spend so far, by key; added to from the embedding threads."""

    def __init__(self, run_id: str | None) -> None:
        self.run_id = run_id or LIVE
        self._sums: dict[tuple[str, str, str, int], Spend] = {}
        self._lock = threading.Lock()

    def add(self, spend: Spend) -> None:
        with self._lock:
            found = self._sums.get(spend.key)
            self._sums[spend.key] = spend if found is None else found.plus(spend)

    def rows(self) -> list[Spend]:
        """The sums, in key order."""
        with self._lock:
            return [self._sums[key] for key in sorted(self._sums)]


_tally: contextvars.ContextVar[Tally | None] = contextvars.ContextVar("vectorsync_spend_tally", default=None)
_charged: contextvars.ContextVar[tuple[str, int] | None] = contextvars.ContextVar(
    "vectorsync_spend_charged", default=None
)
#: What the reserved call of this thread used so far (tokens, cost), as ``add`` counts it.
_call: contextvars.ContextVar[list[float] | None] = contextvars.ContextVar("vectorsync_spend_call", default=None)


@contextmanager
def tallied(run_id: str | None) -> Iterator[Tally]:
    """Tally the calls made inside the block for ``run_id`` (None: live work)."""
    tally = Tally(run_id)
    token = _tally.set(tally)
    try:
        yield tally
    finally:
        _tally.reset(token)


@contextmanager
def charged_to(collection: str, generation: int) -> Iterator[None]:
    """Count the calls made inside the block for ``collection``'s ``generation``."""
    token = _charged.set((collection, generation))
    try:
        yield
    finally:
        _charged.reset(token)


def add(model: str, *, tokens: int, cost: float | None, counted_by: SpendCountedBy) -> None:
    """Add one call of ``model`` to the tally of the block it runs in; nothing outside a tally."""
    call = _call.get()
    if call is not None:
        call[0] += tokens
        call[1] += cost or 0.0
    tally, charged = _tally.get(), _charged.get()
    if tally is None or charged is None:
        return
    collection, generation = charged
    tally.add(
        Spend(
            run_id=tally.run_id,
            collection=collection,
            model=model,
            generation=generation,
            tokens=tokens,
            calls=1,
            cost=cost,
            counted_by=counted_by,
        )
    )


@contextmanager
def measured() -> Iterator[list[float]]:
    """What the calls inside the block use, as ``add`` counts them: [tokens, cost] (``store.calls.caps.reserved``)."""
    used: list[float] = [0, 0.0]
    token = _call.set(used)
    try:
        yield used
    finally:
        _call.reset(token)


def batch_spent() -> Spent:
    """What the tally of the block this runs in holds: the batch's calls so far, as their providers counted."""
    tally = _tally.get()
    return total(tally.rows()) if tally is not None else Spent()
