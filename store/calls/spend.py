"""Spend as the provider counts it: tokens, calls and cost of the model calls made for a batch, per run,
collection, model and generation.

A worker tallies a batch (``tallied(run_id)``) and names, around each generation's work, what the calls are
for (``charged_to(collection, generation)``); the embedding chain adds each call (``add``); the worker then
writes the tally to the state database once (``Ledger.add_spend``). Both are context variables, so parallel
tasks in one process never mix; the embedding threads of a call see them through ``contextvars.copy_context``.
A call made outside a tally (an app's query) is counted by Prometheus only (``store.calls.accounting``).

Tokens are the provider's ``usage`` where it reports one ("provider"), else the model's tokenizer
("tokenizer") or the estimate ("estimate"): ``store.calls.tokens``. A sum keeps the weakest label.

Under a run's cap (``capped``), each call is reserved before it is sent (``reserved``); the calls of one batch's
texts are reserved together first (``prepaid``), so a batch that meets the cap pauses having bought nothing:
what it bought before the pause would otherwise be bought again when its run resumes (issue 50).
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal, Protocol

from store.calls.tokens import ESTIMATE, TokenCounter, token_counter
from store.errors import BudgetExceeded

if TYPE_CHECKING:
    from store.settings import ModelSettings

__all__ = [
    "LIVE",
    "UNMETERED",
    "Budget",
    "Meter",
    "Shared",
    "Spend",
    "SpendCountedBy",
    "Spent",
    "Tally",
    "add",
    "capped",
    "charged_to",
    "cost_of",
    "prepaid",
    "reserved",
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


class _Prepaid:
    """Tokens and cost reserved together for several calls (``prepaid``), drawn by each call as it is sent, from
    any of the threads the calls run in."""

    def __init__(self, tokens: int, cost: float | None) -> None:
        self.tokens, self.cost = tokens, cost
        self._lock = threading.Lock()

    def draw(self, tokens: int, cost: float | None) -> tuple[int, float | None]:
        """What a call of ``tokens`` and ``cost`` still needs beyond what is left here, taking what is."""
        with self._lock:
            taken = min(tokens, self.tokens)
            self.tokens -= taken
            if cost is None or self.cost is None:
                return tokens - taken, cost
            paid = min(cost, self.cost)
            self.cost -= paid
            return tokens - taken, cost - paid


_prepaid: contextvars.ContextVar[_Prepaid | None] = contextvars.ContextVar("vectorsync_spend_prepaid", default=None)


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


class Shared(Protocol):
    """Runs' totals shared by every worker process (``store.broker.reservations.Reservations``)."""

    def reserve(
        self, run_id: str, *, seed: Spent, call: tuple[int, float | None], caps: tuple[int | None, float | None]
    ) -> tuple[str, float] | None:
        """Add ``call`` to the run's total (``seed`` when it has none); the cap it would pass and the total
        without it instead."""
        ...

    def settle(self, run_id: str, *, tokens: int, cost: float) -> None:
        """Add what a call used beyond what it reserved (negative: less)."""
        ...


#: What a refused reservation needed, as its message says it: one call, or a batch's calls (``prepaid``).
NEXT_CALL, BATCH_CALLS = "the next call needs", "the batch's calls need"


class Budget:
    """A run's caps for one batch. What counts against them: what the run spent before the batch (the
    ledger's ``run_spend``), this batch's calls as their providers counted them (its tally), and the calls
    in flight or about to be (a batch's reserved together: ``prepaid``), counted by the model's ``TokenCounter``
    before they were sent.

    With ``shared`` (the cache's Redis), the run's total there counts instead: every process's calls, in flight
    or over, so batches working at once in several processes cannot pass the cap together; ``spent`` only
    starts that total when it has none. Without it, each process counts its own calls in flight."""

    def __init__(
        self,
        *,
        spent: Spent,
        max_tokens: int | None = None,
        max_cost: float | None = None,
        shared: tuple[Shared, str] | None = None,
    ) -> None:
        self.spent, self.max_tokens, self.max_cost, self.shared = spent, max_tokens, max_cost, shared
        self._tokens, self._cost = 0, 0.0
        self._lock = threading.Lock()

    def reserve(self, tokens: int, cost: float | None, batch: Spent, *, calls: str = NEXT_CALL) -> None:
        """Reserve a call's ``tokens`` and ``cost`` with ``batch`` spent so far; BudgetExceeded when that would
        pass a cap (``calls`` says what needed them: the next call, or a batch's calls). Raises StoreUnavailable
        when the shared total cannot be read."""
        if self.shared is not None:
            self._reserve_shared(tokens, cost, calls)
            return
        with self._lock:
            used_tokens = self.spent.tokens + batch.tokens + self._tokens
            used_cost = (self.spent.cost or 0.0) + (batch.cost or 0.0) + self._cost
            if self.max_tokens is not None and used_tokens + tokens > self.max_tokens:
                left = self.max_tokens - used_tokens
                raise BudgetExceeded(self._said("max_tokens", used_tokens, left, tokens, calls))
            if self.max_cost is not None and cost is not None and used_cost + cost > self.max_cost:
                raise BudgetExceeded(self._said("max_cost", used_cost, self.max_cost - used_cost, cost, calls))
            self._tokens += tokens
            self._cost += cost or 0.0

    def release(self, tokens: int, cost: float | None, used: tuple[int, float] = (0, 0.0)) -> None:
        """A reserved call is over, having ``used`` (tokens, cost) as its provider counted them: its tally holds
        them; the shared total is corrected from the reservation to them."""
        if self.shared is not None:
            shared, run_id = self.shared
            shared.settle(run_id, tokens=used[0] - tokens, cost=used[1] - (cost or 0.0))
            return
        with self._lock:
            self._tokens -= tokens
            self._cost -= cost or 0.0

    def _reserve_shared(self, tokens: int, cost: float | None, calls: str) -> None:
        assert self.shared is not None
        shared, run_id = self.shared
        refused = shared.reserve(run_id, seed=self.spent, call=(tokens, cost), caps=(self.max_tokens, self.max_cost))
        if refused is None:
            return
        cap, used = refused
        limit = float((self.max_tokens if cap == "max_tokens" else self.max_cost) or 0)
        needed = tokens if cap == "max_tokens" else cost or 0.0
        raise BudgetExceeded(self._said(cap, used, limit - used, needed, calls))

    def _said(self, cap: str, spent: float, left: float, call: float, calls: str = NEXT_CALL) -> str:
        limit = self.max_tokens if cap == "max_tokens" else self.max_cost
        return (
            f"paused at its budget: {cap} = {limit:g}, spent {spent:g}, {left:g} left, {calls} {call:g}; "
            f"`vectorsync runs resume RUN --{cap.replace('_', '-')} N` continues it"
        )


_budget: contextvars.ContextVar[Budget | None] = contextvars.ContextVar("vectorsync_spend_budget", default=None)


@contextmanager
def capped(budget: Budget | None) -> Iterator[None]:
    """Check the model calls made inside the block against ``budget`` (None: no cap) before they are sent."""
    token = _budget.set(budget)
    try:
        yield
    finally:
        _budget.reset(token)


@contextmanager
def prepaid(meter: Meter, texts: Sequence[str]) -> Iterator[None]:
    """Around the calls that embed ``texts`` (a batch's, the ones no cache or store holds): all of them reserved
    together, before the first is sent; BudgetExceeded, and none is sent, when together they would pass the cap
    of the block this runs in. Each call inside (``reserved``) draws its tokens from that reservation, reserving
    only what it lacks (a call of texts beyond ``texts``); what no call drew is given back at the end. So a batch
    pauses at its cap before it buys anything, never between two of its calls: it has nothing to lose that its
    run would buy again once resumed, with or without an embedding cache. Inside another ``prepaid``, its calls
    draw from the outer one, and this one reserves nothing."""
    budget = _budget.get()
    if budget is None or _prepaid.get() is not None or not texts:
        yield
        return
    tokens = meter.counter.total(texts)
    cost = cost_of(tokens, meter.price_per_million_tokens)
    budget.reserve(tokens, cost, _batch_spent(), calls=BATCH_CALLS)
    pot = _Prepaid(tokens, cost)
    token = _prepaid.set(pot)
    try:
        yield
    finally:
        _prepaid.reset(token)
        budget.release(pot.tokens, pot.cost)


@contextmanager
def reserved(meter: Meter, texts: list[str]) -> Iterator[None]:
    """Around a call of ``texts``: BudgetExceeded, before it is sent, when it would pass the cap of the block
    it runs in; its tokens held against the cap while it is in flight (drawn from the ``prepaid`` block it runs
    in, reserving only what that lacks)."""
    budget = _budget.get()
    if budget is None:
        yield
        return
    tokens = meter.counter.total(texts)
    cost = cost_of(tokens, meter.price_per_million_tokens)
    pot = _prepaid.get()
    more_tokens, more_cost = pot.draw(tokens, cost) if pot is not None else (tokens, cost)
    if more_tokens:  # its cost is its tokens' at one price: covered with them, but for rounding
        try:
            budget.reserve(more_tokens, more_cost, _batch_spent())
        except BaseException:  # refused (or not asked): what it drew from the prepaid block is given back
            if more_tokens < tokens:
                budget.release(tokens - more_tokens, None if cost is None else cost - (more_cost or 0.0))
            raise
    used: list[float] = [0, 0.0]
    token = _call.set(used)
    try:
        yield
    finally:
        _call.reset(token)
        budget.release(tokens, cost, (int(used[0]), used[1]))


def _batch_spent() -> Spent:
    """What the tally of the block this runs in holds: the batch's calls so far, as their providers counted."""
    tally = _tally.get()
    return total(tally.rows()) if tally is not None else Spent()
