"""The ``Collection`` seam: a named set of vector records in one store, searched with metadata filters.

Backends subclass it and fill the ``_``-prefixed hooks; every public method validates its input first, so a bad
call raises ConfigError and writes nothing. ``store.vectors.base`` holds the store seam above it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Sequence
from typing import Literal, Protocol

from store.errors import ConfigError
from store.settings import LimitSettings, SearchSettings, VectorSettings, default
from store.vectors.filters import Filter, check_field, check_size
from store.vectors.fusion import hybrid
from store.vectors.indexed import IndexedFields, check_declared, check_indexed
from store.vectors.keyword.analyzer import Analyzer, analyzer
from store.vectors.modes import SearchMode, check_mode
from store.vectors.records import VectorMatch, VectorRecord, check_collection_name, validate_record, validate_vector
from store.vectors.refusals import check_filter, no_keywords
from store.vectors.rules import Rules
from store.vectors.stored import StoredReads
from store.vectors.tenancy import check_scoped
from store.vectors.timing import observe_search

__all__ = ["DEFAULT_LIMIT", "DEFAULT_METRIC", "MAX_LIMIT", "METRICS", "Collection", "Metric", "QueryEmbedder"]

Metric = Literal["cosine", "dot", "euclidean"]
METRICS: tuple[Metric, ...] = ("cosine", "dot", "euclidean")
DEFAULT_METRIC: Metric = default(VectorSettings, "metric")
#: Matches a search returns unless told otherwise.
DEFAULT_LIMIT = 10
#: The most matches one search returns.
MAX_LIMIT = 10_000


class QueryEmbedder(Protocol):
    """What a collection needs to turn a text query into a vector."""

    def embed(self, text: str) -> Sequence[float]: ...


class Collection(StoredReads):
    """A named set of vector records in one store, searched with metadata filters; the reads of its stored chunks
    (a record's, by text hash, as digests) are ``StoredReads``'."""

    def __init__(self, name: str, *, dimensions: int, metric: Metric, embedder: QueryEmbedder | None = None):
        self.name = check_collection_name(name)
        self.dimensions = dimensions
        self.metric = metric
        self.embedder = embedder
        #: Caps on filters (and Qdrant's residual scans); the store sets its own.
        self.limits = LimitSettings()
        #: Declared indexed fields and their types (``declare_indexes``).
        self.indexed: IndexedFields = {}
        #: The rules the collection holds, read from where it is stored (``store.vectors.rules``).
        self.rules = Rules()
        #: When ``rules`` were read (``time.monotonic()``): the store reads them again after a while.
        self.rules_read_at = time.monotonic()
        #: ``[collections.NAME.search]``: the default mode, the analyzer's language, hybrid fusion.
        self.search_settings = SearchSettings()
        #: Whether hybrid search runs its vector leg in a thread beside the keyword leg (a backend whose
        #: searches are server round trips on a connection pool says yes).
        self.parallel_legs = False

    @property
    def place(self) -> str:
        """Where its records are kept, as an operator finds them: ``collection notes`` (a backend's own name for
        it where that differs: a pgvector table's)."""
        return f"collection {self.name}"

    @property
    def required_filter(self) -> tuple[str, ...]:
        """Fields every search must pin to one value: the collection's own rule, whatever the reader's settings."""
        return self.rules.required_filter

    @property
    def analyzer(self) -> Analyzer:
        """The keyword analyzer of this collection's language (``search_settings.language``)."""
        return analyzer(self.search_settings.language)

    @property
    def keyword_analyzer(self) -> Analyzer | None:
        """The analyzer whose terms writes keep for keyword search, or None when the collection keeps none
        (``search_settings.keeps_keywords``)."""
        return self.analyzer if self.search_settings.keeps_keywords else None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} {self.dimensions}-d {self.metric}>"

    # -- public API -----------------------------------------------------------------

    def upsert(self, record: VectorRecord) -> None:
        """Insert or replace one record. Raises ConfigError, StoreUnavailable."""
        self.upsert_many([record])

    def upsert_many(self, records: Iterable[VectorRecord]) -> int:
        """Insert or replace records (the last of a repeated id wins); return how many.

        Every record is validated before anything is written. Raises ConfigError, StoreUnavailable.
        """
        checked = self._validate(records)
        if checked:
            self._upsert(checked)
        return len(checked)

    def delete(self, id: str) -> None:
        """Delete the record ``id``, if it exists. Raises StoreUnavailable."""
        if not isinstance(id, str):
            raise ConfigError(f"record id must be a string, got {id!r}")
        self._delete_ids([id])

    def delete_where(self, filter: Filter) -> None:
        """Delete every record whose metadata matches ``filter``. Raises ConfigError, StoreUnavailable."""
        self._delete_where(self._filter(filter, required=True))  # type: ignore[arg-type]

    def replace_where(self, filter: Filter, records: Iterable[VectorRecord]) -> None:
        """Swap the records matching ``filter`` for ``records``; see each backend for atomicity.

        Raises ConfigError (nothing changed), StoreUnavailable.
        """
        where = self._filter(filter, required=True)
        self._replace_where(where, self._validate(records))  # type: ignore[arg-type]

    def replace_records(self, record_ids: Sequence[str], records: Iterable[VectorRecord]) -> None:
        """Swap every row of these records (their ``record_id``) for ``records``, as ``replace_where`` with
        ``Filter.any_of("record_id", record_ids)`` does: the pipeline's write, whose caller holds the records'
        locks, so no two swaps of one record overlap and a backend may take a faster path for it.

        Raises ConfigError (nothing changed), StoreUnavailable.
        """
        ids = [str(i) for i in record_ids]
        if ids:
            self._replace_records(ids, self._validate(records))

    def search(
        self,
        query: str | Sequence[float],
        *,
        filter: Filter | None = None,
        limit: int = DEFAULT_LIMIT,
        min_score: float | None = None,
        mode: SearchMode | None = None,
    ) -> list[VectorMatch]:
        """The ``limit`` records that best match ``query`` among those matching ``filter``, best first.

        ``mode`` (None: ``search_settings.mode``): ``vector`` ranks by embedding similarity (``query`` a text,
        embedded with the store's embeddings, or a vector); ``keyword`` by BM25 over the analyzer's terms;
        ``hybrid`` fuses both by weighted reciprocal rank (``store.vectors.fusion``). Keyword and hybrid need a
        text. ``min_score`` drops matches below it, on the mode's own score: the similarity (vector), the BM25
        score (keyword, 0 and up) or the fused score (hybrid, at most ``(vector_weight + keyword_weight) /
        (rrf_k + 1)``). A collection with a required filter refuses a ``filter`` that does not pin each of its
        fields to one value (``store.vectors.tenancy``), in every mode.
        Raises ConfigError, StoreUnavailable, EmbeddingError.
        """
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            raise ConfigError(f"limit {limit!r} is not allowed: use a whole number from 1 to {MAX_LIMIT}")
        if min_score is not None and not (isinstance(min_score, int | float) and math.isfinite(min_score)):
            raise ConfigError(f"min_score {min_score!r} is not allowed: use a finite number, or leave it out")
        chosen = self.search_settings.mode if mode is None else check_mode(mode)
        if chosen != "vector" and not self.search_settings.keeps_keywords:
            raise ConfigError(no_keywords(self.name, chosen))
        started = time.perf_counter()
        where = self._filter(filter)
        check_scoped(self.name, self.required_filter, where)
        if chosen == "vector":
            matches = self._search(self._query_vector(query), where, limit)
        elif chosen == "keyword":
            matches = self._keyword(self._query_text(query, chosen), where, limit)
        else:
            matches = self._hybrid(self._query_text(query, chosen), where, limit)
        if min_score is not None:
            matches = [m for m in matches if m.score >= min_score]
        observe_search(self.name, time.perf_counter() - started)
        return matches

    def count(self, filter: Filter | None = None) -> int:
        """How many records match ``filter`` (all when None). A collection with a required filter is counted
        only within one value of each field, as it is searched. Raises ConfigError, StoreUnavailable."""
        where = self._filter(filter)
        check_scoped(self.name, self.required_filter, where)
        return self._count(where)

    def unheld_fields(self, fields: Iterable[str]) -> tuple[str, ...]:
        """The ``fields`` (dotted for nested objects) for which no record of the collection holds a value (a
        value other than null or an empty list), each once, in the order given: why a filtered search found
        nothing, when a filter names a field the records spell otherwise. Every record is looked at, whatever a
        required filter pins: field names, never values. Raises ConfigError (a bad field name), StoreUnavailable."""
        wanted = [check_field(field) for field in dict.fromkeys(fields)]
        return tuple(field for field in wanted if not self._holds(field))

    def total(self) -> int:
        """How many chunks the collection holds, every tenant's: for operators (``collections list``, a run's
        checks), never for an app's reader. Raises StoreUnavailable."""
        return self._count(None)

    def keyword_drift(self) -> int:
        """How many terms of the stored keyword statistics a recount would change (0: none stored); read only,
        ``recount_keywords`` repairs them. Raises StoreUnavailable."""
        return 0

    def is_empty(self) -> bool:
        """Whether the collection holds no record. Raises StoreUnavailable."""
        return self._count(None) == 0

    def defer_index(self) -> bool:
        """Before a bulk load: drop the ANN index while the collection is empty (building it after the
        rows beats inserting into it). True when deferred; ``ensure_index`` builds it again."""
        return False

    def ensure_index(self) -> None:
        """Build the ANN index if it is missing (after a bulk load). Raises StoreUnavailable."""

    def build_index(self, *, until: float, deadline: float, limit: int) -> bool:
        """``ensure_index`` for a task that may wait only until ``until`` (``time.monotonic()``): True once
        built, False when the build goes on without the caller (pgvector: in PostgreSQL), to be waited for
        again. ``deadline`` (``time.time()``) ends the build, ``limit`` seconds after it began. Raises
        StoreError when it cannot end by its deadline, StoreUnavailable."""
        self.ensure_index()
        return True

    def build_progress(self) -> str | None:
        """The index build under way, in one line (its phase, how far), or None. Raises StoreUnavailable."""
        return None

    def declare_indexes(self, fields: IndexedFields) -> None:
        """Index these metadata fields for filters, creating what is missing (now, or after the collection
        was made), and refuse records whose value of one is not of its type. Raises StoreUnavailable."""
        self.indexed = check_declared(fields)
        if fields:
            self._index_fields(self.indexed)

    # -- shared checks ----------------------------------------------------------------

    def _filter(self, filter: object, *, required: bool = False) -> Filter | None:
        checked = check_filter(filter, required=required)
        if checked is None:
            return None
        return check_size(checked, max_depth=self.limits.max_filter_depth, max_terms=self.limits.max_filter_terms)

    def _validate(self, records: Iterable[VectorRecord]) -> list[VectorRecord]:
        if isinstance(records, VectorRecord):
            raise ConfigError("pass a list of VectorRecord, not a single record (use upsert for one)")
        unique: dict[str, VectorRecord] = {}
        for record in records:
            checked = validate_record(record, dimensions=self.dimensions, collection=self.name)
            check_indexed(checked.metadata, self.indexed, record_id=checked.id, collection=self.name)
            self._check_norm(checked.embedding, what=f"embedding of record {checked.id!r}")
            unique[checked.id] = checked
        return list(unique.values())

    def _check_norm(self, vector: Sequence[float], *, what: str) -> None:
        if self.metric == "cosine" and not any(vector):
            raise ConfigError(f"{what} is all zeros: cosine similarity is undefined for it")

    def _query_vector(self, query: str | Sequence[float]) -> list[float]:
        if isinstance(query, str):
            if self.embedder is None:
                raise ConfigError(
                    f"a text query needs embeddings: build the store with embeddings "
                    f"(store.vectors.backends.open_store) or pass a vector of {self.dimensions} numbers"
                )
            query = self.embedder.embed(query)
        vector = validate_vector(query, dimensions=self.dimensions, collection=self.name, what="query vector")
        self._check_norm(vector, what="query vector")
        return vector

    def _query_text(self, query: str | Sequence[float], mode: SearchMode) -> str:
        if isinstance(query, str):
            return query
        raise ConfigError(
            f"a {mode} search of collection {self.name!r} needs a text query, got a vector: pass the query's text, "
            "or mode='vector' to search by vector (collections.NAME.search.mode sets the default)"
        )

    def _keyword(self, text: str, where: Filter | None, limit: int) -> list[VectorMatch]:
        terms = self.analyzer.query_terms(text)
        return self._keyword_search(terms, where, limit) if terms else []  # only stop words: nothing to rank

    def _hybrid(self, text: str, where: Filter | None, limit: int) -> list[VectorMatch]:
        return hybrid(
            self.search_settings,
            limit=limit,
            parallel=self.parallel_legs,
            vectors=lambda depth: self._search(self._query_vector(text), where, depth),
            keywords=lambda depth: self._keyword(text, where, depth),
        )

    def recount_keywords(self) -> int:
        """Count the stored keyword statistics anew from the rows; how many terms were off (0: none stored)."""
        return 0

    # -- backend hooks ----------------------------------------------------------------

    def _upsert(self, records: list[VectorRecord]) -> None:
        raise NotImplementedError

    def _delete_ids(self, ids: list[str]) -> None:
        raise NotImplementedError

    def _delete_where(self, filter: Filter) -> None:
        raise NotImplementedError

    def _replace_where(self, filter: Filter, records: list[VectorRecord]) -> None:
        raise NotImplementedError

    def _replace_records(self, record_ids: list[str], records: list[VectorRecord]) -> None:
        """Swap the rows of ``record_ids`` for ``records``; by default ``_replace_where`` over their ids."""
        self._replace_where(Filter.any_of("record_id", record_ids), records)

    def _search(self, vector: list[float], filter: Filter | None, limit: int) -> list[VectorMatch]:
        raise NotImplementedError

    def _keyword_search(self, terms: list[str], filter: Filter | None, limit: int) -> list[VectorMatch]:
        """The ``limit`` records matching ``filter`` with the best BM25 score for the distinct query ``terms``
        (``store.vectors.keyword.bm25``), best first, ties by id; records holding none of them are not returned."""
        raise NotImplementedError

    def _count(self, filter: Filter | None) -> int:
        raise NotImplementedError

    def _holds(self, field: str) -> bool:
        """Whether any record holds a value at ``field`` other than null or an empty list."""
        raise NotImplementedError

    def _index_fields(self, fields: IndexedFields) -> None:
        """Create the missing indexes of ``fields``; a backend without indexes (memory) needs none."""
