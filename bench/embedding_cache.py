"""Embeddings kept on disk by content hash, so a second run of the quality bench embeds nothing it embedded.

One SQLite file in the bench's work folder: sha256 of (model, dimensions, text) -> float32 bytes. The
vectors come from the project's own ``Embeddings`` (the ``local`` provider, all-MiniLM-L6-v2, offline);
misses are embedded together, in the caller's order. Queries are served from memory once seen, so a
timed search never waits on the model.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np

__all__ = ["DiskEmbeddings", "local_embeddings"]

MODEL = "all-MiniLM-L6-v2"
DIMENSIONS = 384


def local_embeddings() -> object:
    """The project's ``Embeddings`` over the bundled local model, its Redis cache off, the model offline."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from store.embeddings import Embeddings
    from store.settings import Settings

    settings = Settings.model_validate(
        {
            "models": {"minilm": {"provider": "local", "model": MODEL, "dimensions": DIMENSIONS}},
            "embeddings": {"chain": ["minilm"], "cache_ttl_days": 0},
            "vectors": {"dimensions": DIMENSIONS},
        }
    )
    return Embeddings.from_settings(settings)


class DiskEmbeddings:
    """``embed`` and ``embed_many`` through an on-disk cache in front of ``Embeddings`` (built at the first miss)."""

    def __init__(self, path: Path, *, model: str = MODEL, dimensions: int = DIMENSIONS) -> None:
        self.model, self.dimensions = model, dimensions
        self._db = sqlite3.connect(path)
        self._db.execute("CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vector BLOB NOT NULL)")
        self._memory: dict[str, np.ndarray] = {}
        self._embeddings: object | None = None
        #: Texts embedded by the model (not found on disk) in this process.
        self.embedded = 0

    def _key(self, text: str) -> str:
        return hashlib.sha256(f"{self.model}\0{self.dimensions}\0{text}".encode()).hexdigest()

    def embed(self, text: str) -> Sequence[float]:
        """The vector of ``text``: memory, then disk, then the model."""
        found = self._memory.get(text)
        if found is None:
            found = self._memory[text] = self.embed_many([text])[0]
        return found  # type: ignore[return-value]  # a float32 array: what the stores take

    def remember(self, texts: Sequence[str]) -> None:
        """Hold the vectors of ``texts`` in memory (queries, before their searches are timed)."""
        self._memory.update(zip(texts, self.embed_many(texts), strict=True))

    def embed_many(self, texts: Sequence[str]) -> list[np.ndarray]:
        """The vectors of ``texts`` in order; the misses embedded in one call and saved."""
        keys = [self._key(t) for t in texts]
        stored: dict[str, np.ndarray] = {}
        for start in range(0, len(keys), 500):
            part = keys[start : start + 500]
            rows = self._db.execute(
                f"SELECT key, vector FROM vectors WHERE key IN ({','.join('?' * len(part))})", part
            ).fetchall()  # placeholders only: the keys are bound
            stored.update((key, np.frombuffer(blob, dtype=np.float32)) for key, blob in rows)
        missing = list(dict.fromkeys(t for t, k in zip(texts, keys, strict=True) if k not in stored))
        if missing:
            if self._embeddings is None:
                self._embeddings = local_embeddings()
            made = self._embeddings.embed_many(missing)  # type: ignore[attr-defined]
            rows = [
                (self._key(t), np.asarray(v, dtype=np.float32).tobytes()) for t, v in zip(missing, made, strict=True)
            ]
            self._db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?)", rows)
            self._db.commit()
            stored.update((key, np.frombuffer(blob, dtype=np.float32)) for key, blob in rows)
            self.embedded += len(missing)
        return [stored[k] for k in keys]

    def close(self) -> None:
        self._db.close()
