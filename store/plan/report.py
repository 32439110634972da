"""What a plan found: the records a run would judge new, changed, unchanged or gone, the chunks it would embed or
reuse, and what embedding them would cost in tokens, provider calls, money and time."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Judged", "Plan"]


@dataclass(slots=True)
class Judged:
    """One page of a collection's source, judged as a run's batches would judge it."""

    new: int = 0
    changed: int = 0
    unchanged: int = 0
    #: Records a batch would fail alone (metadata it refuses, too many chunks): nothing is embedded for them.
    failed: int = 0
    #: Ids of the page the ledger holds an entry of (for the records gone: the ledger's others).
    known: int = 0
    #: The chunk texts of each new and changed record, by record id, in page order.
    texts: list[tuple[str, list[str]]] = field(default_factory=list)

    @property
    def fresh(self) -> bool:
        """The ledger holds none of the page (a first load's): its batches look for no stored vector."""
        return not self.known


@dataclass(slots=True, kw_only=True)
class Plan:
    """A reindex's (or a migration's) work, predicted from the source, the ledger, the store and the cache."""

    collection: str
    #: The generation the run writes: the live one for a reindex, the new one for a migration.
    generation: str
    #: "reindex" or "migrate".
    kind: str
    #: The ``[models.NAME]`` entry that would embed (the chain's first), and its model at the API.
    entry: str
    model: str
    new: int = 0
    changed: int = 0
    unchanged: int = 0
    #: Records the ledger holds that the source no longer has (a ``--full`` reindex deletes them).
    gone: int = 0
    failed: int = 0
    #: Chunks of the new and changed records.
    chunks: int = 0
    #: Distinct texts of a batch whose vectors the store holds already (reused), or the embedding cache does.
    reused: int = 0
    cached: int = 0
    #: Distinct texts to embed (each once in a run that caches), their tokens, and how those were counted
    #: ("tokenizer" or "estimate").
    embed: int = 0
    tokens: int = 0
    counted_by: str = "estimate"
    #: Provider calls, packed as the run packs them.
    calls: int = 0
    #: The declared ``price_per_million_tokens`` and the cost it gives; None when no price is declared.
    price_per_million_tokens: float | None = None
    cost: float | None = None
    #: Seconds the declared rate limits need for those calls and tokens at the least; None when none is declared.
    rate_limited_seconds: float | None = None
    #: The chain's first model's batch lane (``[models.NAME.batch]``, ``reindex --batch``): its price, the cost of
    #: the same tokens at it (None: no price declared), and the longest it may wait; all None without a lane.
    batch_price_per_million_tokens: float | None = None
    batch_cost: float | None = None
    batch_wait_hours: float | None = None
    #: Whether the run packs every call full (a leftover pool in the cache's Redis) or each batch's alone (no pool,
    #: or a capped run: ``store.plan.tally.pools``).
    pooled: bool = True
    #: The run's caps: its own (``--max-tokens``, ``--max-cost``), else its collection's ``[budget]``; None: no cap.
    max_tokens: int | None = None
    max_cost: float | None = None
    #: How long the plan took to make.
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def records(self) -> int:
        """Records the source holds (each judged once)."""
        return self.new + self.changed + self.unchanged + self.failed

    def add(self, page: Judged) -> None:
        """Count one judged page's records."""
        self.new += page.new
        self.changed += page.changed
        self.unchanged += page.unchanged
        self.failed += page.failed
