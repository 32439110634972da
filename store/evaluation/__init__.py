"""Retrieval quality of a collection: labelled queries in, recall@k, MRR@k, nDCG@k and latency per search mode.

    from store.evaluation import evaluate, load_queries
    report = evaluate("notes", load_queries("queries.jsonl"), modes=("vector", "keyword", "hybrid"), k=10)

``queries`` reads and checks a JSON Lines file (``{"query", "relevant", "filter"}``); ``metrics`` holds
the record-level metrics; ``running`` searches and scores. ``vectorsync eval`` is the same from the CLI.
"""

from store.evaluation.metrics import ndcg_at_k, percentile, ranked_records, recall_at_k, reciprocal_rank_at_k
from store.evaluation.queries import EvalQuery, load_queries, parse_queries
from store.evaluation.running import DEFAULT_K, DEFAULT_MODES, EvalReport, ModeReport, QueryScore, evaluate

__all__ = [
    "DEFAULT_K",
    "DEFAULT_MODES",
    "EvalQuery",
    "EvalReport",
    "ModeReport",
    "QueryScore",
    "evaluate",
    "load_queries",
    "ndcg_at_k",
    "parse_queries",
    "percentile",
    "ranked_records",
    "recall_at_k",
    "reciprocal_rank_at_k",
]
