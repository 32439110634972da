"""Retrieval quality: recall@10, MRR@10, nDCG@10 and search latency per mode, on labelled sets from Debian.

    .venv/bin/python -m bench --only quality      (or: .venv/bin/python -m bench.quality [--quick])

The sets come from two Debian packages the bench fetches itself, without root (``apt-get download
debian-faq git-doc`` into ``bench/.work/debian``, then ``dpkg-deb -x``; ``bench/debian_docs.py``), and are
cut mechanically (``bench/labelled_sets.py``):

- **debian faq**: ``debian-faq.en.txt``. Every numbered section is one record: its body, dedented, without
  its heading (a subsection is a record of its own). A section whose heading holds a ``?`` is a question:
  the heading is the query, its body the one relevant record. The other sections (the chapters' own text,
  "8.1.1 dpkg", "15.1 Hardening the system", ...) are distractors. 123 questions, 153 records.
- **git faq**: ``gitfaq.txt``. Each ``[[anchor]]`` entry's question line is the query and its answer (the
  lines up to the next anchor or section heading) the relevant record; every other git manual page
  (``git*.txt`` whose first line is ``NAME(N)``), whole, is a distractor. 20 questions, 207 records.
- **git options** (identifier-heavy, known item): every entry of the OPTIONS section of every git manual
  page (a run of term lines ending in ``::``, then its description up to the next term or section;
  ``include::`` and ``ifdef::`` lines dropped; entries whose terms name no ``-`` option skipped) is one
  record: the page name, the terms, a blank line, the description (``git-commit --amend`` and its text, as a
  heading path would start a chunk). Its query is ``what does git COMMAND OPTION do``: COMMAND the page name
  without ``git-``, OPTION the entry's first long term (else its first short one) as typed, i.e. with
  ``[no-]`` and any argument removed (``--[no-]verify`` -> ``--verify``, ``-C <commit>`` -> ``-C``,
  ``--fixup=[(amend|reword):]<commit>`` -> ``--fixup``). Entries giving the same query share it (both
  relevant). Every other option's record is a distractor. 1,398 queries, 1,399 records.

Records are chunked with the project's default chunker (``Chunker()``, 512 tokens, overlap 64), each chunk
stored with ``record_id``; embedded with the bundled all-MiniLM-L6-v2 through the ``local`` provider
(``HF_HUB_OFFLINE=1``), cached on disk by content hash in ``bench/.work`` (``bench/embedding_cache.py``), so a
second run embeds nothing. Queries are embedded before their searches are timed: the latency is the search
alone. Metrics are record-level (``store.evaluation``): a record counts once, at its best chunk.

Each set is searched in each mode: vector, keyword (BM25), and hybrid at vector:keyword weights 1:1, 2:1
and 3:1, each with the RRF constant ``rrf_k`` at 10, 30 and 60 (settings only; ``choose`` picks one variant for
every set: no per-set tuning). The debian faq is also indexed at chunk sizes
128 and 256 tokens beside the default 512. Last, 100,000 chunks on pgvector (the FAQ's, then synthetic
filler: text drawn from the corpus's words, vectors near the real ones) time vector against hybrid.

Targets (issue 20): hybrid >= vector + 0.05 nDCG@10 on git options; hybrid >= vector - 0.01 on each FAQ;
hybrid p95 <= 2x vector p95 at 100,000 chunks. Never run as a test.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

from bench.debian_docs import unpacked, work_dir
from bench.embedding_cache import DIMENSIONS, DiskEmbeddings
from bench.labelled_sets import LabelledSet, chunked, debian_faq, git_faq, git_options
from bench.report import Row, print_table
from store.evaluation import ModeReport, evaluate
from store.vectors import VectorRecord, VectorStore

__all__ = ["VARIANTS", "Variant", "choose", "main", "run"]

SECTION = "quality"
K = 10
#: (max_tokens, overlap) of the chunk-size comparison; the default chunker's last.
CHUNK_SIZES = ((128, 16), (256, 32), (512, 64))


@dataclass(frozen=True)
class Variant:
    """One way of searching: a mode, and for hybrid its vector:keyword weights and RRF constant."""

    name: str
    mode: str
    weights: tuple[float, float] | None = None
    rrf_k: int | None = None


#: The hybrid grid: vector:keyword weights 1:1, 2:1, 3:1, each at RRF constants 10, 30 and 60 (the usual one).
HYBRIDS = tuple(Variant(f"hybrid {w}:1 k{k}", "hybrid", (float(w), 1.0), k) for k in (10, 30, 60) for w in (1, 2, 3))
VARIANTS = (Variant("vector", "vector"), Variant("keyword", "keyword"), *HYBRIDS)
#: Each labelled set's target: hybrid nDCG@10 minus vector nDCG@10 at least this much.
TARGETS = {"debian faq": -0.01, "git faq": -0.01, "git options": 0.05}


def choose(reports: dict[str, dict[str, ModeReport]]) -> tuple[Variant, dict[str, float]]:
    """The rule for the defaults: of the hybrid grid, the variant meeting every set's target with the largest
    smallest margin (its gain over vector minus the target); if none meets them all, the one closest to.
    The same variant for every set: no per-set tuning. Returns it and its margin per set."""

    def margins(variant: Variant) -> dict[str, float]:
        return {name: round(r[variant.name].ndcg - r["vector"].ndcg - TARGETS[name], 4) for name, r in reports.items()}

    best = max(HYBRIDS, key=lambda v: (min(margins(v).values()), sum(margins(v).values())))
    return best, margins(best)


def load(store: VectorStore, name: str, chunks: list[tuple[str, str, str, int]], embeddings: DiskEmbeddings) -> int:
    """A fresh collection ``name`` holding ``chunks`` with their (cached) embeddings, indexed; its size."""
    if name in store.list_collections():
        store.drop_collection(name)
    collection = store.get_collection(name, create=True)
    collection.defer_index()
    vectors = embeddings.embed_many([text for _, text, _, _ in chunks])
    collection.upsert_many(
        [
            VectorRecord(cid, vector, text, {"record_id": rid, "chunk": n})  # type: ignore[arg-type]
            for (cid, text, rid, n), vector in zip(chunks, vectors, strict=True)
        ]
    )
    collection.ensure_index()
    return len(chunks)


def measure(
    store: VectorStore,
    name: str,
    labelled: LabelledSet,
    embeddings: DiskEmbeddings,
    variants: tuple[Variant, ...] = VARIANTS,
) -> dict[str, ModeReport]:
    """Each variant's report over the set's queries (each query embedded before any search is timed)."""
    from bench.search_settings import weighted

    embeddings.remember([q.query for q in labelled.queries])
    collection = store.get_collection(name, create=True)
    reports = {}
    for variant in variants:
        extra = {} if variant.rrf_k is None else {"rrf_k": variant.rrf_k}
        with weighted(store, name, variant.weights, **extra):
            report = evaluate(collection, labelled.queries, modes=[variant.mode], k=K)  # type: ignore[list-item]
        reports[variant.name] = replace(report.modes[0], mode=variant.name)  # type: ignore[arg-type]
    return reports


def rows_of(title: str, reports: dict[str, ModeReport], detail: str) -> list[Row]:
    """One row per variant: nDCG@10 its value, nDCG over vector's its ratio, the rest in its detail."""
    base = reports["vector"].ndcg
    return [
        Row(
            f"{SECTION} {title}",
            f"{name}: nDCG@{K}",
            r.ndcg,
            "",
            ratio=round(r.ndcg / base, 3) if base else None,
            detail=f"recall@{K} {r.recall:.3f}, MRR@{K} {r.mrr:.3f}, p50 {r.p50_ms:.2f} ms, p95 {r.p95_ms:.2f} ms, "
            f"{r.queries} queries; {detail}",
        )
        for name, r in reports.items()
    ]


def _target(title: str, reports: dict[str, ModeReport], variant: str, target: float, margin: float) -> Row:
    gain = reports[variant].ndcg - reports["vector"].ndcg
    return Row(
        f"{SECTION} {title}",
        f"chosen {variant} - vector nDCG@{K}",
        round(gain, 4),
        "",
        target=f">= {target:+.2f}",
        ok=margin >= 0,
        detail=f"margin {margin:+.4f} (the rule: bench.quality.choose)",
    )


@contextmanager
def _store(kind: str) -> Iterator[VectorStore]:
    from bench.servers import database
    from store.vectors.backends import memory_store

    embeddings = DiskEmbeddings(work_dir() / "embeddings.sqlite3")
    try:
        if kind == "memory":
            yield memory_store(dimensions=DIMENSIONS, embedder=embeddings)
            return
        from store.vectors.pgvector import PgvectorStore

        with database() as url:
            store = PgvectorStore(url, dimensions=DIMENSIONS, embedder=embeddings)
            try:
                yield store
            finally:
                store.close()
    finally:
        embeddings.close()


def run(quick: bool = False, *, store_kind: str = "pgvector") -> list[Row]:
    """Every set in every variant, the defaults chosen by ``choose``, the chunk sizes, and the 100,000-chunk
    latency; quick: a tenth of the option queries, no chunk sizes, 20,000 chunks."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    doc = unpacked()
    sets = [debian_faq(doc), git_faq(doc), git_options(doc)]
    if quick:
        sets[2] = replace(sets[2], queries=sets[2].queries[::10])
    rows: list[Row] = []
    measured: dict[str, dict[str, ModeReport]] = {}
    with _store(store_kind) as store:
        embeddings: DiskEmbeddings = store.embedder  # type: ignore[assignment]
        for labelled in sets:
            name = "q_" + labelled.name.replace(" ", "_")
            chunks = load(store, name, chunked(labelled), embeddings)
            measured[labelled.name] = measure(store, name, labelled, embeddings)
            rows += rows_of(
                labelled.name, measured[labelled.name], f"{labelled.summary()}, {chunks} chunks of 512 tokens"
            )
            store.drop_collection(name)
        chosen, margins = choose(measured)
        for labelled in sets:
            rows.append(
                _target(
                    labelled.name, measured[labelled.name], chosen.name, TARGETS[labelled.name], margins[labelled.name]
                )
            )
        if not quick:
            rows += chunk_sizes(store, sets[0], embeddings)
        if store_kind == "pgvector":  # the latency target is pgvector's
            from bench.hybrid_latency import latency_rows

            rows += latency_rows(store, sets[0], embeddings, total=20_000 if quick else 100_000, variant=chosen)
    return rows


def chunk_sizes(store: VectorStore, labelled: LabelledSet, embeddings: DiskEmbeddings) -> list[Row]:
    """The debian faq at each chunk size, in each variant."""
    rows = []
    for max_tokens, overlap in CHUNK_SIZES[:-1]:
        name = f"q_faq_{max_tokens}"
        chunks = load(store, name, chunked(labelled, max_tokens, overlap), embeddings)
        reports = measure(store, name, labelled, embeddings)
        rows += rows_of(
            f"debian faq, chunks of {max_tokens} tokens",
            reports,
            f"{chunks} chunks of {max_tokens} tokens, overlap {overlap}",
        )
        store.drop_collection(name)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a tenth of the option queries; 20,000 chunks")
    parser.add_argument("--store", default="pgvector", choices=("pgvector", "memory"), help="where the sets live")
    args = parser.parse_args()
    rows = run(quick=args.quick, store_kind=args.store)
    print_table(rows)
    for row in rows:
        if row.detail:
            print(f"- {row.section}, {row.name}: {row.detail}")


if __name__ == "__main__":
    main()
