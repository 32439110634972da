"""The ``local`` reranker: a sentence-transformers ``CrossEncoder`` on this machine.

It loads only from a local directory or an installed package (a module whose
``get_model_path()`` gives the directory), never from a hub: with neither,
the error says which. Scores come through the model's activation; a model that
returns raw logits (some MS MARCO models) is put through a sigmoid here.
"""

from __future__ import annotations

import importlib
import math
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from store.calls import accounting
from store.calls.threads import budget_here
from store.calls.tokens import estimate_tokens
from store.errors import ConfigError
from store.settings import ModelSettings

__all__ = ["LocalReranker", "model_path"]


def model_path(name: str, model: str) -> str:
    """The directory of ``model``: itself when it is one, else an installed package's ``get_model_path()``."""
    if Path(model).expanduser().is_dir():
        return str(Path(model).expanduser())
    try:
        package = importlib.import_module(model.replace("-", "_"))
    except ImportError:
        raise ConfigError(
            f"models.{name}: rerank model {model!r} is neither a local directory nor an installed package; "
            f"download the cross-encoder into a directory and set models.{name}.model to its path"
        ) from None
    locate = getattr(package, "get_model_path", None)
    if locate is None:
        raise ConfigError(f"models.{name}: package {model!r} has no get_model_path(): give the model's directory")
    return str(locate())


class LocalReranker:
    """A cross-encoder run in this process."""

    endpoint = "local"

    def __init__(self, *, name: str, settings: ModelSettings) -> None:
        self.name, self.model = name, settings.model
        self.threads = settings.threads
        self._path = model_path(name, settings.model)
        self._loaded: Any = None
        self._lock = threading.Lock()

    def scores(self, query: str, passages: Sequence[str]) -> list[float]:
        with self._lock:
            raw = self._load().predict([(query, passage) for passage in passages], show_progress_bar=False)
        accounting.record("rerank", self.model, tokens=sum(estimate_tokens(query + p) for p in passages))
        values = [float(v) for v in raw]
        if any(v < 0.0 or v > 1.0 for v in values):  # logits: no activation in the model's config
            values = [1.0 / (1.0 + math.exp(-v)) for v in values]
        return values

    def _load(self) -> Any:
        if self._loaded is None:
            try:
                from sentence_transformers import CrossEncoder
            except ImportError:
                raise ConfigError(
                    f"models.{self.name} uses provider 'local', which needs sentence-transformers: "
                    "pip install 'vectorsync[local]'"
                ) from None
            import torch

            torch.set_num_threads(budget_here(self.threads))  # this process's share of the cores (store.calls.threads)
            self._loaded = CrossEncoder(self._path, local_files_only=True, device="cpu")
        return self._loaded
