"""The ``fake`` provider: deterministic vectors from hashed words, no network, no model.

Each lower-cased alphanumeric word is hashed (blake2b) to one position and a
sign; a text's vector is the L2-normalised sum of its words. Texts that share
words are close, texts that share none are near-orthogonal, and the same text
always gives the same vector. It is the reference provider and the test double.
"""

from __future__ import annotations

import hashlib
import math
import re
from functools import lru_cache

from store.embeddings.providers.base import DEFAULT_LIMITS, Limits

__all__ = ["DEFAULT_FAKE_MODEL", "FakeProvider", "hash_embed"]

#: The model name of the first-try default (no models configured).
DEFAULT_FAKE_MODEL = "fake"

_WORD = re.compile(r"[a-z0-9]+")


@lru_cache(maxsize=65536)
def _bucket(word: str, dimensions: int) -> tuple[int, float]:
    digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
    number = int.from_bytes(digest, "little")
    return (number >> 1) % dimensions, (1.0 if number & 1 else -1.0)


def hash_embed(text: str, dimensions: int) -> list[float]:
    """The unit vector of ``text``'s words; a text without words gets a fixed unit vector."""
    weights: dict[int, float] = {}
    for word in _WORD.findall(text.lower()):
        index, sign = _bucket(word, dimensions)
        weights[index] = weights.get(index, 0.0) + sign
    norm = math.sqrt(sum(weight * weight for weight in weights.values()))
    if norm == 0.0:
        # No words (or words that cancel out): the same unit vector for all of them.
        return [1.0 / math.sqrt(dimensions)] * dimensions
    # Sparse on purpose: a few words touch a few positions, so build the list, then fill them.
    vector = [0.0] * dimensions
    for index, weight in weights.items():
        vector[index] = weight / norm
    return vector


class FakeProvider:
    """Embeds by hashing words; see the module docstring."""

    endpoint = "local"

    def __init__(
        self,
        *,
        name: str = DEFAULT_FAKE_MODEL,
        model: str = DEFAULT_FAKE_MODEL,
        dimensions: int,
        limits: Limits = DEFAULT_LIMITS,
    ) -> None:
        self.name = name
        self.model = model
        self.dimensions = dimensions
        self.limits = limits

    def __repr__(self) -> str:
        return f"<FakeProvider {self.name!r} {self.dimensions}-d>"

    def embed_batch(self, texts: list[str]) -> list[list[float]]:
        """One vector per text; never raises."""
        return [hash_embed(text, self.dimensions) for text in texts]
