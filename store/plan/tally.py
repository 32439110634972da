"""Provider calls and tokens of the texts a run would embed, packed as the run packs them.

A pooled run (a leftover pool in the cache's Redis, ``worker.pipeline.leftovers``) fills every provider call but its
last, and the cache gives each distinct text once per run: its calls are the distinct texts packed in order. Without
a pool (no cache's Redis, or a capped run: ``pools``) each batch of records packs its own texts, and without a
cache a text two batches hold is bought twice. Texts are kept as 8-byte digests in numpy arrays, so a plan of
millions of chunks stays in tens of megabytes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from store.calls.tokens import estimate_tokens
from store.embeddings.providers.base import Limits

__all__ = ["Tally", "pack", "pools"]


def pools(*, pool: bool, max_tokens: int | None, max_cost: float | None) -> bool:
    """Whether a run pools its leftovers (``worker.pipeline.leftovers``): only with a pool to reach (``pool``: the
    cache's Redis) and no cap, its own or its collection's, since a capped run parks a batch whole and a pooled record
    waits in Redis outside any batch. The rule of the run's fan-out, and so of its plan."""
    return pool and max_tokens is None and max_cost is None


def pack(estimates: Sequence[int], *, call_size: int, limits: Limits) -> int:
    """How many provider calls ``store.embeddings.batching.plan_batches`` makes of texts of these estimated
    tokens, in this order."""
    most = min(call_size, limits.max_inputs)
    if most * limits.max_tokens_per_input <= limits.max_tokens_per_request:
        return -(-len(estimates) // most)  # the token limit cannot bind
    calls, count, tokens = 0, 0, 0
    for size in estimates:
        if count and (count >= most or tokens + size > limits.max_tokens_per_request):
            calls, count, tokens = calls + 1, 0, 0
        count, tokens = count + 1, tokens + size
    return calls + (1 if count else 0)


def _digest(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")


@dataclass
class Tally:
    """The texts to embed, added a batch of records at a time; ``count`` tells what they need."""

    call_size: int
    limits: Limits
    #: Counts a text's tokens as the model's tokenizer does (or estimates them).
    tokens_of: Callable[[str], int]
    pooled: bool = True
    #: Whether a run that does not pool caches what it buys, so that a text an earlier batch bought is not bought
    #: again (a pooled run always does: its pool lives beside the cache).
    cached: bool = False
    texts: int = 0
    tokens: int = 0
    estimated: int = 0
    calls: int = 0
    _digests: list[np.ndarray] = field(default_factory=list)
    _tokens: list[np.ndarray] = field(default_factory=list)
    _estimates: list[np.ndarray] = field(default_factory=list)

    def add(self, texts: Sequence[str]) -> None:
        """The distinct texts one batch of records would embed (the cache and the store lacking them)."""
        if not texts:
            return
        if not self.pooled and not self.cached:
            estimates = [estimate_tokens(t) for t in texts]
            self.texts += len(texts)
            self.tokens += sum(self.tokens_of(t) for t in texts)
            self.estimated += sum(estimates)
            self.calls += pack(estimates, call_size=self.call_size, limits=self.limits)
            return
        self._digests.append(np.fromiter((_digest(t) for t in texts), dtype=np.uint64, count=len(texts)))
        self._tokens.append(np.fromiter((self.tokens_of(t) for t in texts), dtype=np.int64, count=len(texts)))
        self._estimates.append(np.fromiter((estimate_tokens(t) for t in texts), dtype=np.int64, count=len(texts)))

    def count(self) -> Tally:
        """Fold what the batches added into texts, tokens and calls, each distinct text once, in the order first
        added: packed all together for a pooled run, each batch's alone for one that is not; returns self."""
        if not self._digests:
            return self
        _, first = np.unique(np.concatenate(self._digests), return_index=True)
        first.sort()
        tokens, estimates = np.concatenate(self._tokens)[first], np.concatenate(self._estimates)[first]
        self.texts += len(first)
        self.tokens += int(tokens.sum())
        self.estimated += int(estimates.sum())
        self.calls += sum(
            pack(part.tolist(), call_size=self.call_size, limits=self.limits) for part in self._calls(first, estimates)
        )
        self._digests, self._tokens, self._estimates = [], [], []
        return self

    def _calls(self, first: np.ndarray, estimates: np.ndarray) -> list[np.ndarray]:
        """The estimates of the texts each provider call packing sees: the run's all at once when pooled, else each
        batch's texts that no earlier batch bought (``first``: the texts' first places among all added)."""
        if self.pooled:
            return [estimates]
        sizes = [len(digests) for digests in self._digests]
        batch_of = np.repeat(np.arange(len(sizes)), sizes)[first]
        return np.split(estimates, np.flatnonzero(np.diff(batch_of)) + 1)
