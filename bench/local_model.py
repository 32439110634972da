"""Benchmark the ``local`` embedding provider against one raw sentence-transformers encode, on the same chunks.

    .venv/bin/python -m bench.local_model [--quick]

The chunks are those ``vectorsync dev`` indexes: Python's help topics cut by
the docs collection's chunker (200 tokens, overlap 24: ~650 characters). Each
run measures, in this order (and again, without ``--quick``):

- raw encode: ``SentenceTransformer.encode`` of every chunk in this process,
  torch's defaults (a thread per core, batches of 32): the figure to reach;
- the provider as a worker with a pool of 2 runs it, on torch, on ONNX Runtime
  and on ONNX Runtime with int8 weights: two fresh processes with
  ``VECTORSYNC_LOCAL_PROCESSES=2`` build ``Embeddings`` from settings (cache
  off) and take turns at tasks of 20 records (``vectorsync dev``'s
  worker.batch_size), each task's chunks through ``embed_many`` as
  ``worker.pipeline`` sends them. The clock starts once both have loaded
  the model (and exported it, the first time) and stops when both are done.

Target: each pipeline figure at least 0.85 of raw encode. Never run as a test.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import time
from dataclasses import dataclass
from typing import Any

from bench.report import Row, print_table
from bench.targets import judged

__all__ = ["main", "run"]

SECTION = "local model"
RECORDS_PER_TASK = 20
QUICK_CHUNKS = 240
#: (row name, [models.minilm] settings beyond provider, model and dimensions)
VARIANTS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("pipeline, torch", {"backend": "torch"}),
    ("pipeline, onnx (default)", {"backend": "onnx"}),
    ("pipeline, onnx int8", {"backend": "onnx", "quantize": True}),
)


@dataclass(frozen=True)
class Corpus:
    """Chunks grouped as the worker's tasks would hold them: one list of chunk texts per task."""

    tasks: list[list[str]]

    @property
    def chunks(self) -> list[str]:
        return [text for task in self.tasks for text in task]


def corpus(limit: int | None = None) -> Corpus:
    """The dev docs collection's chunks, ``limit`` at most (whole records), in tasks of 20 records."""
    from producer.cli.dev.corpus import topic_rows
    from worker.pipeline.chunker import Chunker

    chunker = Chunker(max_tokens=200, overlap=24)
    records, total = [], 0
    for row in topic_rows():
        texts = [chunk.text for chunk in chunker.split(f"{row['topic']}\n\n{row['body']}")]
        if limit is not None and total + len(texts) > limit:
            break
        records.append(texts)
        total += len(texts)
    tasks = [
        [t for record in records[i : i + RECORDS_PER_TASK] for t in record]
        for i in range(0, len(records), RECORDS_PER_TASK)
    ]
    return Corpus(tasks)


def raw_encode(chunks: list[str], model: Any) -> float:
    """Chunks a second of one ``SentenceTransformer.encode`` call, torch's default threads and batch size."""
    start = time.perf_counter()
    model.encode(chunks, normalize_embeddings=True, show_progress_bar=False)
    return len(chunks) / (time.perf_counter() - start)


def _embed_share(model: dict[str, Any], tasks: list[list[str]], barrier: Any, results: Any) -> None:
    """One pool process: load the model, wait for the other, embed its tasks; report its busy time."""
    from store.embeddings import Embeddings
    from store.settings import Settings

    settings = Settings(
        models={"minilm": {"provider": "local", "model": "all-MiniLM-L6-v2", "dimensions": 384, **model}},
        embeddings={"chain": ["minilm"], "cache_ttl_days": 0},
        vectors={"dimensions": 384},
    )
    embeddings = Embeddings.from_settings(settings)
    embeddings.embed_many(["warm up: load the model before the clock starts"])
    barrier.wait()
    start = time.perf_counter()
    for task in tasks:
        embeddings.embed_many(task)
    results.put((start, time.perf_counter()))


def pipeline(tasks: list[list[str]], model: dict[str, Any], processes: int = 2) -> float:
    """Chunks a second of ``processes`` fresh processes sharing ``tasks`` in turn, as a worker's pool does."""
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(processes), context.Queue()
    os.environ["VECTORSYNC_LOCAL_PROCESSES"] = str(processes)  # what the worker sets from its pool size
    try:
        workers = [
            context.Process(target=_embed_share, args=(model, tasks[i::processes], barrier, results))
            for i in range(processes)
        ]
        for worker in workers:
            worker.start()
        spans = [results.get(timeout=600) for _ in workers]
        for worker in workers:
            worker.join()
    finally:
        os.environ.pop("VECTORSYNC_LOCAL_PROCESSES", None)
    chunks = sum(len(task) for task in tasks)
    return chunks / (max(end for _, end in spans) - min(start for start, _ in spans))


def run(quick: bool = False) -> list[Row]:
    """Raw encode and each pipeline variant on the same chunks, interleaved; quick: 240 chunks, one round."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    from store.embeddings.providers.local import model_location

    data = corpus(QUICK_CHUNKS if quick else None)
    chunks = data.chunks
    model = SentenceTransformer(model_location("all-MiniLM-L6-v2"), device="cpu")
    model.encode(chunks[:8])  # warm
    raw: list[float] = []
    measured: dict[str, list[float]] = {name: [] for name, _ in VARIANTS}
    for _ in range(1 if quick else 2):
        raw.append(raw_encode(chunks, model))
        for name, settings in VARIANTS:
            measured[name].append(pipeline(data.tasks, settings))
    raw.append(raw_encode(chunks, model))
    limit = sum(raw) / len(raw)
    detail = f"{len(chunks)} chunks of {sum(map(len, chunks)) // len(chunks)} characters on average"
    rows = [
        Row(
            SECTION,
            "raw SentenceTransformer.encode, 1 process",
            limit,
            "chunks/s",
            1.0,
            detail=f"{detail}; runs {', '.join(f'{r:.1f}' for r in raw)}",
        )
    ]
    for name, rates in measured.items():
        rate = sum(rates) / len(rates)
        rows.append(
            Row(
                SECTION,
                f"{name}, 2 processes",
                rate,
                "chunks/s",
                rate / limit,
                detail=f"runs {', '.join(f'{r:.1f}' for r in rates)}",
                **judged("local model against raw encode", rate / limit),
            )
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="240 chunks, one round (under 2 minutes)")
    args = parser.parse_args()
    rows = run(quick=args.quick)
    print_table(rows)
    for row in rows:
        print(f"- {row.name}: {row.detail}")


if __name__ == "__main__":
    main()
