"""What the fake OpenAI server (``tests/fake_openai.py``) answers: embeddings as JSON floats or base64, in
OpenAI's or Ollama's shape; rerank scores by word overlap with the query; the chat model's default answers;
errors; the vectors a client reads back (``served_embed``, ``dense_embed``); and tokens as OpenAI counts them
(``cl100k_tokens``)."""

from __future__ import annotations

import base64
import functools
import hashlib
import re
from typing import Any

import numpy as np

from store.embeddings.providers.fake import hash_embed

__all__ = [
    "base64_vector",
    "cl100k_tokens",
    "default_chat",
    "dense_embed",
    "error_body",
    "ok_body",
    "rerank_body",
    "served_embed",
]


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def _overlap(query: str, text: str) -> float:
    wanted = _words(query)
    return len(wanted & _words(text)) / max(len(wanted), 1)


_PASSAGE = re.compile(r"^\[(\d+)\][^\n]*\n(.+?)(?=\n\n\[\d+\]|\Z)", re.M | re.S)


def default_chat(prompt: str) -> dict[str, Any]:
    """The chat model's answer without a script: scores for a rerank prompt, else the first passage, cited."""
    passages = _PASSAGE.findall(prompt)
    query = prompt.split("\n", 1)[0].split(": ", 1)[-1]
    if prompt.startswith("Query: "):
        return {"scores": [{"passage": int(n), "score": _overlap(query, text)} for n, text in passages]}
    if not passages:
        return {"answer": "No passages.", "sources": [], "answered": False}
    return {"answer": " ".join(passages[0][1].split())[:200], "sources": [int(passages[0][0])], "answered": True}


def rerank_body(body: dict[str, Any], drop: int = 0) -> Any:
    """The scores of a ``/rerank`` request: word overlap with the query, in Cohere's shape, or TEI's bare list."""
    texts = body.get("texts") if "texts" in body else body.get("documents", [])
    scores = [_overlap(body.get("query", ""), text) for text in texts]
    scores = scores[: len(scores) - drop]
    if "texts" in body:  # TEI: a bare list, best first
        return sorted(({"index": i, "score": s} for i, s in enumerate(scores)), key=lambda r: -r["score"])
    return {
        "results": sorted(
            ({"index": i, "relevance_score": s} for i, s in enumerate(scores)), key=lambda r: -r["relevance_score"]
        )
    }


def ok_body(
    path: str, model: str, vectors: list[list[float]], encoding_format: str | None, tokens: int
) -> dict[str, Any]:
    """An embeddings answer: Ollama's, or OpenAI's (base64 when asked) with ``tokens`` as its usage."""
    if path == "/api/embed":
        return {"model": model, "embeddings": vectors}
    encoded = [base64_vector(v) for v in vectors] if encoding_format == "base64" else vectors
    # Reversed on purpose: clients must sort by index, not trust the order.
    data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(encoded)][::-1]
    return {"object": "list", "data": data, "model": model, "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}


def served_embed(text: str, dimensions: int) -> list[float]:
    """``hash_embed`` as a client reads it back from base64: each value rounded to float32."""
    return np.asarray(hash_embed(text, dimensions), dtype="<f4").tolist()


def dense_embed(text: str, dimensions: int) -> list[float]:
    """``hash_embed`` plus small noise seeded by the text: a unit vector with every coordinate set.

    Float32 values written with 9 significant digits, as OpenAI's JSON floats are.
    """
    seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
    vector = np.asarray(hash_embed(text, dimensions)) + 0.05 * np.random.default_rng(seed).standard_normal(dimensions)
    values = (vector / np.linalg.norm(vector)).astype("<f4").tolist()
    return [float(f"{value:.9g}") for value in values]


def base64_vector(vector: list[float]) -> str:
    """A vector as OpenAI sends it for ``encoding_format: "base64"``: little-endian float32, base64."""
    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")


def error_body(path: str, status: int, message: str) -> dict[str, Any]:
    """An error answer, as Ollama or OpenAI shape it."""
    if path == "/api/embed":
        return {"error": message}
    return {"error": {"message": message, "type": "scripted", "code": str(status)}}


def cl100k_tokens(text: str) -> int:
    """``text``'s tokens as OpenAI's embedding models count them (cl100k_base, special tokens as text)."""
    return len(cl100k().encode_ordinary(text)) if text else 0


@functools.cache
def cl100k() -> Any:
    """The cl100k_base encoding, loaded once (its first load takes seconds on a busy machine)."""
    import bpe_openai

    return bpe_openai.get_encoding("cl100k_base")
