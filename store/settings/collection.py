"""``[collections.NAME]``: one collection's source, budget, chunker, indexed fields, search and tenancy."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints, model_validator

from store.settings.budget import BudgetSettings
from store.settings.search import SearchSettings
from store.settings.section import Section
from store.settings.source import FIELD_PATTERN, SourceSettings

__all__ = ["ChunkerSettings", "CollectionSettings", "FieldType", "IndexSettings"]


class ChunkerSettings(Section):
    max_tokens: int = Field(default=512, gt=0)
    overlap: int = Field(default=64, ge=0)
    markdown: bool = False

    @model_validator(mode="after")
    def _overlap_below_max_tokens(self) -> ChunkerSettings:
        if self.overlap >= self.max_tokens:
            raise ValueError(f"chunker overlap ({self.overlap}) must be below max_tokens ({self.max_tokens})")
        return self


#: Types a declared indexed field may have; a stored value of another type is refused at write.
FieldType = Literal["integer", "float", "keyword", "bool", "datetime"]


class IndexSettings(Section):
    """Metadata fields filtered often: indexed for ranges and equality (pgvector btree, Qdrant payload index)."""

    #: Field (dotted for nested objects) to type, e.g. ``{ owner_id = "integer", created_at = "datetime" }``.
    fields: dict[Annotated[str, StringConstraints(pattern=FIELD_PATTERN, max_length=200)], FieldType] = Field(
        default_factory=dict
    )


class CollectionSettings(Section):
    source: SourceSettings = Field(default_factory=SourceSettings)
    budget: BudgetSettings = Field(default_factory=BudgetSettings)
    chunker: ChunkerSettings = Field(default_factory=ChunkerSettings)
    index: IndexSettings = Field(default_factory=IndexSettings)
    search: SearchSettings = Field(default_factory=SearchSettings)
    #: Metadata fields every search must pin to one value (tenancy: ``["workspace_id"]``); a search without
    #: an equality on each, ANDed at the top, is refused.
    required_filter: list[Annotated[str, StringConstraints(pattern=FIELD_PATTERN, max_length=200)]] = Field(
        default_factory=list
    )
    #: The embedding cache's scope: ``collection``, its vectors found by its own records alone (an erased text
    #: leaves no vector another collection is served); ``shared``, the pool of every collection that says so.
    cache: Literal["collection", "shared"] = "collection"
    #: How the runs Celery beat starts on it (reconcile sweeps, capture's safety net included) buy embeddings:
    #: "sync" through the failover chain, or "batch" through the chain's first model's batch lane
    #: (``[models.NAME.batch]``, docs/batch-lane.md). Live changes and pushed documents are always synchronous.
    lane: Literal["sync", "batch"] = "sync"
