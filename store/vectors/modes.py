"""Search modes: how a collection ranks a query (``vector``, ``keyword``, ``hybrid``), named once here."""

from __future__ import annotations

from typing import Literal, get_args

from store.errors import ConfigError

__all__ = ["SEARCH_MODES", "SearchMode", "check_mode"]

#: ``vector``: nearest embeddings; ``keyword``: BM25 over the analyzer's terms; ``hybrid``: both, fused by
#: weighted reciprocal rank fusion (``store.vectors.fusion``).
SearchMode = Literal["vector", "keyword", "hybrid"]
SEARCH_MODES: tuple[SearchMode, ...] = get_args(SearchMode)


def check_mode(mode: object) -> SearchMode:
    """``mode`` when it is one of ``SEARCH_MODES``, else a ConfigError naming it and the choices."""
    if isinstance(mode, str) and mode in SEARCH_MODES:
        return mode
    raise ConfigError(
        f"search mode {mode!r} is not allowed: use one of {', '.join(SEARCH_MODES)} "
        "(or None for the collection's collections.NAME.search.mode)"
    )
