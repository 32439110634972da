"""A run's caps, checked before each model call is sent: what the run spent before the batch (the ledger's), the
batch's calls as their providers counted them (``store.calls.spend``'s tally) and the calls in flight.

Under a run's cap (``capped``), each call is reserved before it is sent (``reserved``); the calls of one batch's
texts are reserved together first (``prepaid``), so a batch that meets the cap pauses having bought nothing:
what it bought before the pause would otherwise be bought again when its run resumes.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Protocol

from store.calls.spend import Meter, Spent, batch_spent, cost_of, measured
from store.errors import BudgetExceeded

__all__ = ["BATCH_CALLS", "NEXT_CALL", "Budget", "Shared", "capped", "prepaid", "reserved"]


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
NEXT_CALL = "the next call needs"
BATCH_CALLS = "the batch's calls need"


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
    budget.reserve(tokens, cost, batch_spent(), calls=BATCH_CALLS)
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
            budget.reserve(more_tokens, more_cost, batch_spent())
        except BaseException:  # refused (or not asked): what it drew from the prepaid block is given back
            if more_tokens < tokens:
                budget.release(tokens - more_tokens, None if cost is None else cost - (more_cost or 0.0))
            raise
    with measured() as used:
        try:
            yield
        finally:
            budget.release(tokens, cost, (int(used[0]), used[1]))
