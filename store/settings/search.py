"""``[collections.NAME.search]``: how a collection's searches rank (mode, analyzer language, hybrid fusion)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from store.settings.section import Section

__all__ = ["LANGUAGES", "Language", "SearchSettings"]

#: The analyzer's languages: PostgreSQL's text search configurations that have a Snowball stemmer and stop
#: words, and ``simple`` (lower-case words only: no stop words, no stemming).
Language = Literal[
    "simple",
    "danish",
    "dutch",
    "english",
    "finnish",
    "french",
    "german",
    "hungarian",
    "italian",
    "nepali",
    "norwegian",
    "portuguese",
    "russian",
    "spanish",
    "swedish",
    "turkish",
]
LANGUAGES: tuple[str, ...] = Language.__args__  # type: ignore[attr-defined]


class SearchSettings(Section):
    #: The mode of a search that names none: ``vector``, ``keyword`` (BM25) or ``hybrid`` (both, fused).
    mode: Literal["vector", "keyword", "hybrid"] = "vector"
    #: Whether writes keep the keyword index (terms, BM25 statistics, postings) that keyword and hybrid search
    #: read. Unset: kept when ``mode`` is ``keyword`` or ``hybrid``, not for ``vector`` (analyzing every chunk's
    #: text is a fifth of a write's time). Turned on later, the stored text is analyzed (no re-embedding).
    keywords: bool | None = None
    #: The keyword analyzer's stop words and stemmer; changing it re-analyzes the stored text (no re-embedding).
    language: Language = "english"
    #: Weight of the vector leg in hybrid fusion (weighted reciprocal rank fusion). The defaults, 2:1 at
    #: ``rrf_k`` 10, are the quality bench's choice (bench.quality.choose; docs/quality-results.md).
    vector_weight: float = Field(default=2.0, ge=0, le=100)
    #: Weight of the keyword leg in hybrid fusion.
    keyword_weight: float = Field(default=1.0, ge=0, le=100)
    #: The RRF constant k: a match at rank r of a leg adds weight / (k + r).
    rrf_k: int = Field(default=10, ge=1, le=10_000)

    @property
    def keeps_keywords(self) -> bool:
        """Whether the collection keeps a keyword index: ``keywords``, else whether ``mode`` searches by keyword."""
        return self.keywords if self.keywords is not None else self.mode != "vector"

    @model_validator(mode="after")
    def _keywords_for_mode(self) -> SearchSettings:
        if self.keywords is False and self.mode != "vector":
            raise ValueError(
                f"search.mode = {self.mode!r} reads the keyword index, which search.keywords = false turns off: "
                "set keywords = true or leave it out, or mode = 'vector'"
            )
        return self

    @model_validator(mode="after")
    def _some_weight(self) -> SearchSettings:
        if self.vector_weight == 0 and self.keyword_weight == 0:
            raise ValueError(
                "search.vector_weight and search.keyword_weight are both 0: hybrid search would rank "
                "nothing; give at least one a positive weight (e.g. vector_weight = 1)"
            )
        return self
