"""A Qdrant collection: points whose ids derive from record ids, searched with native filters.

A point's id is ``uuid5(POINT_NAMESPACE, record_id)`` and its payload is
``{"id", "text", "text_hash", "model", "metadata"}`` (``text_hash``: ``text_digest`` of the text, hex, with a
keyword payload index on a server), so user metadata never collides with the keys this module writes.
"""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from qdrant_client import models

from store.errors import ConfigError
from store.vectors.base import Collection, Metric, QueryEmbedder
from store.vectors.filters import Filter
from store.vectors.indexed import IndexedFields
from store.vectors.qdrant.client import translated
from store.vectors.qdrant.filters import METADATA_KEY, excluding, payload_key, split_filter
from store.vectors.qdrant.keywords import KEYWORDS, pin, query_vector, sparse_vector
from store.vectors.records import StoredChunk, VectorMatch, VectorRecord, text_digest

__all__ = [
    "DELETE_BATCH",
    "PAYLOAD_SCHEMAS",
    "POINT_NAMESPACE",
    "SCROLL_PAGE",
    "TEXT_HASH",
    "UPSERT_BATCH",
    "QdrantCollection",
    "QdrantParts",
    "point_id",
]

#: The payload key of a point's text hash (indexed on a server, with ``model``: ``QdrantStore``).
TEXT_HASH = "text_hash"
#: Namespace of the UUIDv5 point ids; changing it orphans every stored point.
POINT_NAMESPACE = uuid.UUID("8f5b3c2e-6a1d-5e4f-9b7a-2c3d4e5f6a7b")
#: Points sent per upsert call.
UPSERT_BATCH = 256
#: Point ids sent per delete call.
DELETE_BATCH = 1024
#: Points read per scroll call when a filter is checked in Python.
SCROLL_PAGE = 256
#: Largest page of candidates a search with a Python residual asks for at once.
MAX_SEARCH_PAGE = 4096


#: The payload index of each declared field type.
PAYLOAD_SCHEMAS: dict[str, models.PayloadSchemaType] = {
    "integer": models.PayloadSchemaType.INTEGER,
    "float": models.PayloadSchemaType.FLOAT,
    "keyword": models.PayloadSchemaType.KEYWORD,
    "bool": models.PayloadSchemaType.BOOL,
    "datetime": models.PayloadSchemaType.DATETIME,
}


def point_id(record_id: str) -> str:
    """The Qdrant point id of ``record_id``: a UUIDv5, since Qdrant takes only UUIDs and integers."""
    return str(uuid.uuid5(POINT_NAMESPACE, record_id))


def _point(record: VectorRecord, keywords: models.SparseVector | None) -> models.PointStruct:
    payload = {
        "id": record.id,
        "text": record.text,
        TEXT_HASH: text_digest(record.text),
        "model": record.model,
        METADATA_KEY: record.metadata,
    }
    vector: dict[str, Any] = {"": list(record.embedding)}
    if keywords is not None:
        vector[KEYWORDS] = keywords
    return models.PointStruct(id=point_id(record.id), vector=vector, payload=payload)


def _chunk(payload: dict[str, Any]) -> StoredChunk:
    """A point's payload as the chunk it holds; Qdrant keeps no write time."""
    chunk = _metadata(payload).get("chunk", 0)
    return StoredChunk(
        str(payload.get("id", "")), int(chunk), str(payload.get("text", "")), str(payload.get("model", ""))
    )


def _metadata(payload: dict[str, Any] | None) -> dict[str, Any]:
    found = (payload or {}).get(METADATA_KEY)
    return dict(found) if isinstance(found, dict) else {}


def _batches(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class QdrantParts(Protocol):
    """What a collection is opened with, from its store (``QdrantStore`` is one): its vector space and query
    embedder, the client, where it is (for errors) and the search parameters its vector searches send."""

    @property
    def dimensions(self) -> int: ...

    @property
    def metric(self) -> Metric: ...

    @property
    def embedder(self) -> QueryEmbedder | None: ...

    @property
    def url(self) -> str: ...

    @property
    def search_params(self) -> models.SearchParams | None: ...

    @property
    def _client(self) -> Any: ...


class QdrantCollection(Collection):
    """One Qdrant collection of the same name.

    ``replace_where`` is not atomic: Qdrant has no transactions. It upserts the
    new points first, then deletes the points matching the filter whose ids are
    not among the new ones; so readers never see "neither", but may briefly see
    both.
    """

    def __init__(self, store: QdrantParts, name: str):
        super().__init__(name, dimensions=store.dimensions, metric=store.metric, embedder=store.embedder)
        self._client = store._client
        self._where = store.url
        self._search_params = store.search_params
        #: The mean length the keyword weights use (``keywords.py``); None until the first terms are written.
        self.avgdl: float | None = None

    def _calling(self, what: str) -> AbstractContextManager[None]:
        return translated(self._where, f"{what} in collection {self.name!r}")

    def _index_fields(self, fields: IndexedFields) -> None:
        """A payload index of the declared type on each field (creating one again is a no-op on the server)."""
        with self._calling("create payload indexes"), warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # local mode keeps no payload index, and warns so
            for field, kind in fields.items():
                self._client.create_payload_index(
                    self.name, payload_key(field), field_schema=PAYLOAD_SCHEMAS[kind], wait=True
                )

    # -- writes -------------------------------------------------------------------------

    def _upsert(self, records: list[VectorRecord]) -> None:
        terms_of = self.keyword_analyzer
        counts = [terms_of.frequencies(r.text) for r in records] if terms_of is not None else [None] * len(records)
        with self._calling("upsert points"):
            avgdl = self._pinned_avgdl(counts) if terms_of is not None else None
            points = [
                _point(r, sparse_vector(c, avgdl) if avgdl and c else None)
                for r, c in zip(records, counts, strict=True)
            ]
            for batch in _batches(points, UPSERT_BATCH):
                self._client.upsert(self.name, points=list(batch), wait=True)

    def _pinned_avgdl(self, counts: list[Any]) -> float | None:
        """The avgdl of the weights: the collection's, or pinned now from the first terms written."""
        if self.avgdl is None:
            lengths = [n for c in counts if (n := sum(c.values()))]
            if lengths:
                self.avgdl = sum(lengths) / len(lengths)
                pin(self._client, self.name, self.keyword_analyzer, self.avgdl)
        return self.avgdl

    def _delete_ids(self, ids: list[str]) -> None:
        self._delete_points([point_id(id) for id in ids])

    def _delete_points(self, point_ids: list[str]) -> None:
        with self._calling("delete points"):
            for batch in _batches(point_ids, DELETE_BATCH):
                selector = models.PointIdsList(points=list(batch))
                self._client.delete(self.name, points_selector=selector, wait=True)

    def _delete_where(self, filter: Filter) -> None:
        self._delete_matching(filter, keep=[])

    def _replace_where(self, filter: Filter, records: list[VectorRecord]) -> None:
        self._upsert(records)
        self._delete_matching(filter, keep=[point_id(r.id) for r in records])

    def _delete_matching(self, filter: Filter, *, keep: list[str]) -> None:
        """Delete the points matching ``filter`` except those in ``keep``."""
        where, residual = split_filter(filter)
        if residual is not None:
            kept = set(keep)
            self._delete_points([p for p in self._matching_ids(where, residual) if p not in kept])
            return
        selector = models.FilterSelector(filter=excluding(where, keep) or models.Filter())
        with self._calling("delete points"):
            self._client.delete(self.name, points_selector=selector, wait=True)

    # -- reads ----------------------------------------------------------------------------

    def _scroll(self, where: models.Filter | None, *, vectors: bool = False) -> Iterator[models.Record]:
        """Every point matching ``where``, with its payload (and its vector with ``vectors``), page by page."""
        offset: Any = None
        while True:
            with self._calling("scroll points"):
                points, offset = self._client.scroll(
                    self.name,
                    scroll_filter=where,
                    limit=SCROLL_PAGE,
                    offset=offset,
                    with_payload=True,
                    with_vectors=vectors,
                )
            yield from points
            if offset is None:
                return

    def _chunks_of(self, record_id: str) -> list[StoredChunk]:
        where, _ = split_filter(Filter.eq("record_id", record_id))  # an equality on a string: Qdrant's own
        points = (point.payload or {} for point in self._scroll(where))
        return [_chunk(payload) for payload in points if _metadata(payload).get("record_id") == record_id]

    def _vectors_by_hash(self, hashes: list[str], model: str) -> Iterator[tuple[str, list[float]]]:
        where = models.Filter(
            must=[
                models.FieldCondition(key="model", match=models.MatchValue(value=model)),
                models.FieldCondition(key=TEXT_HASH, match=models.MatchAny(any=hashes)),
            ]
        )
        for point in self._scroll(where, vectors=True):
            payload, vector = point.payload or {}, point.vector
            if isinstance(vector, dict):
                vector = vector.get("")
            if isinstance(vector, list):
                yield str(payload.get(TEXT_HASH, "")), [float(x) for x in vector]

    def _matching_ids(self, where: models.Filter | None, residual: Filter) -> list[str]:
        found = []
        for scanned, point in enumerate(self._scroll(where)):
            self._within_scan_cap(scanned)
            if residual.matches(_metadata(point.payload)):
                found.append(str(point.id))
        return found

    def _within_scan_cap(self, scanned: int) -> None:
        """A filter Qdrant cannot evaluate is checked in Python on the points it returns, up to a cap."""
        if scanned > self.limits.max_residual_scan:
            raise ConfigError(
                f"the filter on collection {self.name!r} needs more than {self.limits.max_residual_scan} points "
                "checked in Python (Qdrant cannot compare strings by order, nor integers above 2**53): add a "
                "condition Qdrant can evaluate, or raise limits.max_residual_scan"
            )

    def _count(self, filter: Filter | None) -> int:
        where, residual = split_filter(filter)
        if residual is not None:
            return len(self._matching_ids(where, residual))
        with self._calling("count points"):
            return int(self._client.count(self.name, count_filter=where, exact=True).count)

    def _holds(self, field: str) -> bool:
        # IsEmpty matches a missing key, null and []: one point outside it holds a value.
        empty = models.IsEmptyCondition(is_empty=models.PayloadField(key=payload_key(field)))
        with self._calling("scroll points"):
            points, _ = self._client.scroll(
                self.name, scroll_filter=models.Filter(must_not=[empty]), limit=1, with_payload=False
            )
        return bool(points)

    def _search(self, vector: list[float], filter: Filter | None, limit: int) -> list[VectorMatch]:
        where, residual = split_filter(filter)
        if residual is None:
            return [self._match(p) for p in self._query(vector, where, limit=limit, offset=0)]
        return self._search_checked(vector, where, residual, limit)

    def _keyword_search(self, terms: list[str], filter: Filter | None, limit: int) -> list[VectorMatch]:
        """BM25 through the sparse vector (``keywords.py``); ties by id, as on the other backends."""
        where, residual = split_filter(filter)
        query = query_vector(terms)
        if residual is None:
            found = [self._match(p, keyword=True) for p in self._query(query, where, limit=limit, offset=0)]
        else:
            found = self._search_checked(query, where, residual, limit)
        return sorted(found, key=lambda m: (-m.score, m.id))

    def _search_checked(
        self, vector: Any, where: models.Filter | None, residual: Filter, limit: int
    ) -> list[VectorMatch]:
        """Page through the closest points, best first, keeping those ``residual`` matches."""
        found: list[VectorMatch] = []
        offset, page = 0, max(4 * limit, 64)
        while len(found) < limit:
            self._within_scan_cap(offset)
            points = self._query(vector, where, limit=page, offset=offset)
            keyword = isinstance(vector, models.SparseVector)
            found.extend(self._match(p, keyword=keyword) for p in points if residual.matches(_metadata(p.payload)))
            if len(points) < page:
                break
            offset, page = offset + page, max(page, min(4 * page, MAX_SEARCH_PAGE))
        return found[:limit]

    def _query(
        self, vector: list[float] | models.SparseVector, where: models.Filter | None, *, limit: int, offset: int
    ) -> list[models.ScoredPoint]:
        sparse = isinstance(vector, models.SparseVector)
        with self._calling("search"):
            found: list[models.ScoredPoint] = self._client.query_points(
                self.name,
                query=vector,
                query_filter=where,
                limit=limit,
                offset=offset,
                with_payload=True,
                with_vectors=False,
                using=KEYWORDS if sparse else None,
                search_params=None if sparse else self._search_params,
            ).points
        return found

    def _match(self, point: models.ScoredPoint, *, keyword: bool = False) -> VectorMatch:
        payload = point.payload or {}
        return VectorMatch(
            id=str(payload.get("id", point.id)),
            score=float(point.score) if keyword else self._score(point.score),
            text=str(payload.get("text", "")),
            metadata=_metadata(payload),
        )

    def _score(self, raw: float) -> float:
        """Higher is closer: Qdrant gives the raw distance for EUCLID, the others are similarities."""
        return 1.0 / (1.0 + raw) if self.metric == "euclidean" else float(raw)
