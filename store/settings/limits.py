"""``[limits]``: the caps on what one input (a record, a filter, a search) may hold."""

from __future__ import annotations

from pydantic import Field

from store.settings.section import Section

__all__ = ["LimitSettings"]


class LimitSettings(Section):
    """Caps on what one input may hold. Going over one is a ConfigError naming the value, the cap and this
    setting; it is never retried."""

    #: Characters of a record id (PostgreSQL btree index rows hold about 2,700 bytes).
    max_id_chars: int = Field(default=512, gt=0, le=2000)
    #: Levels of nesting in a record's metadata.
    max_metadata_depth: int = Field(default=32, gt=0, le=500)
    #: Chunks one record may make (a 10 MB text makes thousands).
    max_chunks_per_record: int = Field(default=2000, gt=0)
    #: Levels of nesting in a filter ($and, $or, $not).
    max_filter_depth: int = Field(default=16, gt=0, le=200)
    #: Conditions and values in one filter, all $in lists counted.
    max_filter_terms: int = Field(default=1000, gt=0, le=100_000)
    #: Points Qdrant may return for one search whose filter is partly checked in Python.
    max_residual_scan: int = Field(default=100_000, gt=0)
