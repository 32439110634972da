"""Benchmark how embeddings travel: JSON floats against base64 float32, through the real openai client.

    .venv/bin/python -m bench.transport [--quick]

Starts the tests' OpenAI-protocol server in this process (384-d) and embeds the
same texts in batches of 100 through ``OpenAIProvider``, once asking for float and
once for base64. Dense vectors (every coordinate set, as real models give) are
the figure that matters; the server's default hashed vectors, mostly 0.0, are
measured too, since they flatter JSON. "Wall" seconds include the in-process
server building and serialising its answers; "client" seconds leave that out,
as a real server pays it on its own machine. On the base64 rows, ``ratio`` is
float / base64 (above 1: base64 is faster or smaller). Never run as a test.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

from bench.report import Row, print_table
from store.embeddings.providers.openai import EncodingFormat, OpenAIProvider
from store.settings import ModelSettings
from tests.fake_openai import FakeOpenAI

__all__ = ["Measure", "main", "measure", "run"]

SECTION = "transport"
DIMENSIONS = 384
BATCH = 100
WORDS = [
    "onboarding",
    "rollout",
    "invoice",
    "renewal",
    "pricing",
    "discount",
    "contract",
    "meeting",
    "call",
    "email",
    "churn",
    "support",
    "dana",
    "quarter",
    "seats",
    "migration",
]


@dataclass(frozen=True)
class Measure:
    """One transport's run: wall and client-side seconds for all batches, and the mean response size."""

    seconds: float
    client_seconds: float
    bytes_per_response: float


def texts(count: int) -> list[str]:
    """``count`` distinct notes of about a dozen words, the same every run."""
    return [" ".join([f"note {i}", *(WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(10))]) for i in range(count)]


def provider_for(server: FakeOpenAI, encoding_format: EncodingFormat) -> OpenAIProvider:
    """An ``OpenAIProvider`` at ``server`` that asks for ``encoding_format``."""
    settings = ModelSettings.model_validate(
        {
            "provider": "openai",
            "model": "bench-embedding",
            "dimensions": DIMENSIONS,
            "base_url": server.url,
            "timeout": 60.0,
        }
    )
    provider = OpenAIProvider(name="bench", settings=settings)
    provider.encoding_format = encoding_format
    return provider


def measure(encoding_format: EncodingFormat, notes: list[str], *, dense: bool) -> Measure:
    """Embed ``notes`` in batches of ``BATCH``, one after another, after one untimed warm-up batch."""
    with FakeOpenAI(dimensions=DIMENSIONS, dense=dense) as server:
        provider = provider_for(server, encoding_format)
        try:
            provider.embed_batch(notes[:BATCH])
            sent, served, calls = server.sent_bytes, server.serve_seconds, server.calls
            started = time.perf_counter()
            for start in range(0, len(notes), BATCH):
                provider.embed_batch(notes[start : start + BATCH])
            seconds = time.perf_counter() - started
        finally:
            provider.close()
        asked = {request.encoding_format for request in server.requests}
        if asked != {encoding_format}:
            raise RuntimeError(f"asked for {encoding_format}, but the server saw {sorted(map(str, asked))}")
        return Measure(
            seconds, seconds - (server.serve_seconds - served), (server.sent_bytes - sent) / (server.calls - calls)
        )


def best(encoding_format: EncodingFormat, notes: list[str], *, dense: bool, repeats: int) -> Measure:
    """The fastest of ``repeats`` runs (the machine is shared: the minimum is the least disturbed)."""
    runs = [measure(encoding_format, notes, dense=dense) for _ in range(repeats)]
    return min(runs, key=lambda m: m.client_seconds)


def rows_for(kind: str, floats: Measure, base64: Measure, count: int) -> list[Row]:
    """Six rows for one kind of vector: wall seconds, client seconds, bytes per response."""
    detail = f"{count:,} texts, {DIMENSIONS}-d, batches of {BATCH}"
    return [
        Row(SECTION, f"{kind}, float: wall", floats.seconds, "s", detail=detail),
        Row(
            SECTION, f"{kind}, base64: wall", base64.seconds, "s", ratio=floats.seconds / base64.seconds, detail=detail
        ),
        Row(SECTION, f"{kind}, float: client", floats.client_seconds, "s", detail=detail),
        Row(
            SECTION,
            f"{kind}, base64: client",
            base64.client_seconds,
            "s",
            ratio=floats.client_seconds / base64.client_seconds,
            detail=detail,
        ),
        Row(SECTION, f"{kind}, float: bytes per response", floats.bytes_per_response, "B", detail=detail),
        Row(
            SECTION,
            f"{kind}, base64: bytes per response",
            base64.bytes_per_response,
            "B",
            ratio=floats.bytes_per_response / base64.bytes_per_response,
            detail=detail,
        ),
    ]


def run(quick: bool = False) -> list[Row]:
    """The transport rows: 20,000 texts (4,000 when ``quick``), dense then hashed vectors."""
    count, repeats = (4_000, 1) if quick else (20_000, 3)
    notes = texts(count)
    rows: list[Row] = []
    for kind, dense in (("dense", True), ("hashed", False)):
        floats = best("float", notes, dense=dense, repeats=repeats)
        base64 = best("base64", notes, dense=dense, repeats=repeats)
        rows += rows_for(kind, floats, base64, count)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="4,000 texts, one run each")
    print_table(run(quick=parser.parse_args().quick))


if __name__ == "__main__":
    main()
