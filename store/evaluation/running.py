"""Run labelled queries against a collection in each search mode and score the answers.

    from store.evaluation import evaluate, load_queries
    report = evaluate("notes", load_queries("queries.jsonl"), modes=("vector", "hybrid"), k=10)
    assert report.mode("hybrid").ndcg >= 0.6

The modes take turns on each query, so a machine's drift touches them alike; each mode's first search
is a warm-up and is not timed. Latency is the whole ``search`` call, query embedding included.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, get_args

from store.errors import ConfigError
from store.evaluation.metrics import ndcg_at_k, percentile, ranked_records, recall_at_k, reciprocal_rank_at_k
from store.evaluation.queries import EvalQuery
from store.vectors import SearchMode
from store.vectors.base import MAX_LIMIT, Collection
from store.vectors.records import VectorMatch

if TYPE_CHECKING:
    from store.client import Client

__all__ = ["CHUNKS_PER_RECORD", "DEFAULT_K", "DEFAULT_MODES", "EvalReport", "ModeReport", "QueryScore", "evaluate"]

#: Records each metric reads unless told otherwise.
DEFAULT_K = 10
#: Every search mode, in the order reports list them.
DEFAULT_MODES: tuple[SearchMode, ...] = get_args(SearchMode)
#: Chunks a search returns per record scored, so ``k`` records remain once a record's other chunks are dropped.
CHUNKS_PER_RECORD = 5

Search = Callable[[EvalQuery, SearchMode, int], list[VectorMatch]]


@dataclass(frozen=True)
class QueryScore:
    """One query in one mode: its scores, its time and the first ``k`` records it ranked."""

    line: int
    query: str
    mode: SearchMode
    recall: float
    reciprocal_rank: float
    ndcg: float
    ms: float
    ranked: tuple[str, ...]


@dataclass(frozen=True)
class ModeReport:
    """One mode over every query: mean recall@k, MRR@k, nDCG@k, and latency percentiles in milliseconds."""

    mode: SearchMode
    queries: int
    recall: float
    mrr: float
    ndcg: float
    p50_ms: float
    p95_ms: float


@dataclass(frozen=True)
class EvalReport:
    """What ``evaluate`` measured: one ``ModeReport`` per mode, and every query's ``QueryScore``."""

    collection: str
    k: int
    modes: tuple[ModeReport, ...]
    scores: tuple[QueryScore, ...]

    def mode(self, mode: str) -> ModeReport:
        """The report of ``mode``. Raises ConfigError for a mode that was not run."""
        for report in self.modes:
            if report.mode == mode:
                return report
        raise ConfigError(f"mode {mode!r} was not evaluated (evaluated: {', '.join(m.mode for m in self.modes)})")

    def as_dict(self) -> dict[str, Any]:
        """JSON-plain form (what ``vectorsync eval --json`` prints)."""
        return asdict(self)


def evaluate(
    collection: str | Collection,
    queries: Sequence[EvalQuery],
    *,
    modes: Sequence[SearchMode] = DEFAULT_MODES,
    k: int = DEFAULT_K,
    client: Client | None = None,
    chunks: int | None = None,
) -> EvalReport:
    """Search each query in each mode and score the first ``k`` records against its relevant ones.

    ``collection`` is a name, read through ``client`` (default: this process's default client) in its live
    generation, or a ``Collection`` searched as it is. ``chunks``: matches each search asks for (default
    ``k * CHUNKS_PER_RECORD``). Raises ConfigError (bad modes, k or queries), StoreUnavailable, ProviderError.
    """
    checked = _check_modes(modes)
    depth = _check_depth(k, chunks)
    if not queries:
        raise ConfigError("no queries to evaluate: pass at least one EvalQuery (store.evaluation.load_queries)")
    name, search = _searcher(collection, client)
    for mode in checked:
        search(queries[0], mode, depth)  # warm-up: connections, the model, caches
    scores = [_score(query, mode, search, depth, k) for query in queries for mode in checked]
    return EvalReport(
        name, k, tuple(_summary(mode, [s for s in scores if s.mode == mode]) for mode in checked), tuple(scores)
    )


def _searcher(collection: str | Collection, client: Client | None) -> tuple[str, Search]:
    if isinstance(collection, Collection):
        target = collection
        return target.name, lambda q, mode, limit: target.search(
            q.query, filter=q.search_filter(), limit=limit, mode=mode
        )
    if not isinstance(collection, str):
        raise ConfigError(f"collection must be a name or a Collection, got {collection!r}")
    if client is None:
        from store.process.defaults import default_client

        client = default_client()
    chosen = client
    return collection, lambda q, mode, limit: list(
        chosen.search(collection, q.query, filter=q.search_filter(), limit=limit, mode=mode)
    )


def _score(query: EvalQuery, mode: SearchMode, search: Search, depth: int, k: int) -> QueryScore:
    started = time.perf_counter()
    matches = search(query, mode, depth)
    ms = (time.perf_counter() - started) * 1000
    ranked = ranked_records(matches)[:k]
    relevant = frozenset(query.relevant)
    return QueryScore(
        query.line,
        query.query,
        mode,
        recall_at_k(ranked, relevant, k),
        reciprocal_rank_at_k(ranked, relevant, k),
        ndcg_at_k(ranked, relevant, k),
        ms,
        tuple(ranked),
    )


def _summary(mode: SearchMode, scores: list[QueryScore]) -> ModeReport:
    count = len(scores)
    times = [s.ms for s in scores]
    return ModeReport(
        mode,
        count,
        sum(s.recall for s in scores) / count,
        sum(s.reciprocal_rank for s in scores) / count,
        sum(s.ndcg for s in scores) / count,
        percentile(times, 50),
        percentile(times, 95),
    )


def _check_modes(modes: Sequence[str]) -> tuple[SearchMode, ...]:
    if isinstance(modes, str):
        modes = [part.strip() for part in modes.split(",")]
    known = ", ".join(DEFAULT_MODES)
    if not modes:
        raise ConfigError(f"no search mode to evaluate: name one or more of {known}")
    wrong = [m for m in modes if m not in DEFAULT_MODES]
    if wrong:
        raise ConfigError(f"search mode {wrong[0]!r} is not known: use {known}")
    if len(set(modes)) != len(modes):
        raise ConfigError(f"search modes {', '.join(modes)} name one mode twice: name each once")
    return tuple(modes)  # type: ignore[arg-type]


def _check_depth(k: int, chunks: int | None) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_LIMIT:
        raise ConfigError(f"k {k!r} is not allowed: use a whole number from 1 to {MAX_LIMIT}")
    depth = min(k * CHUNKS_PER_RECORD, MAX_LIMIT) if chunks is None else chunks
    if isinstance(depth, bool) or not isinstance(depth, int) or not k <= depth <= MAX_LIMIT:
        raise ConfigError(f"chunks {depth!r} is not allowed: use a whole number from k ({k}) to {MAX_LIMIT}")
    return depth
