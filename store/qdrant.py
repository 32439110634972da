"""The Qdrant backend: one Qdrant collection per collection, point ids derived from record ids.

A point's id is ``uuid5(POINT_NAMESPACE, record_id)`` and its payload is
``{"id", "text", "model", "metadata"}``, so user metadata never collides with
the keys this module writes; the filter field ``owner.id`` is the payload key
``metadata.owner.id``.

Filters compile to Qdrant's own filter language with the semantics of
``Filter.matches``. What Qdrant cannot say exactly (an order over strings,
integers beyond 2**53) is left as a residual that is checked in Python on the
points Qdrant returns for the rest of the filter.

``url`` is an http(s) address of a Qdrant server, or ``:memory:`` or a folder
for qdrant-client's local mode (tests, one process). Local mode builds no
payload indexes, so none are asked for there.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from functools import cache
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from qdrant_client import QdrantClient, models

from store.collection import Collection, Metric, QueryEmbedder, VectorStore
from store.errors import ConfigError, StoreError, StoreUnavailable, VectorsyncError
from store.filters import And, AnyOf, Compare, Eq, Filter, Not, Or, check_field
from store.records import VectorMatch, VectorRecord

if TYPE_CHECKING:
    from store.settings import Settings

__all__ = [
    "DELETE_BATCH",
    "POINT_NAMESPACE",
    "SCROLL_PAGE",
    "UPSERT_BATCH",
    "QdrantCollection",
    "QdrantStore",
    "point_id",
    "split_filter",
]

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
#: Integers up to this size are exact as the 64-bit floats Qdrant's ranges use.
EXACT_INT = 2**53
#: Payload keys this module writes; user metadata lives under ``metadata``.
METADATA_KEY = "metadata"
#: Metadata fields always indexed on a server: the pipeline deletes and replaces by record_id.
ALWAYS_INDEXED = ("record_id",)

_DISTANCES: dict[str, models.Distance] = {
    "cosine": models.Distance.COSINE,
    "dot": models.Distance.DOT,
    "euclidean": models.Distance.EUCLID,
}


def point_id(record_id: str) -> str:
    """The Qdrant point id of ``record_id``: a UUIDv5, since Qdrant takes only UUIDs and integers."""
    return str(uuid.uuid5(POINT_NAMESPACE, record_id))


# -- errors ---------------------------------------------------------------------------


@cache
def _driver_errors() -> tuple[type[BaseException], ...]:
    """The exceptions qdrant-client and its transports raise; ValueError is local mode's 'not found'."""
    import httpx
    from qdrant_client.common.client_exceptions import QdrantException
    from qdrant_client.http.exceptions import ApiException

    errors: list[type[BaseException]] = [ApiException, QdrantException, httpx.HTTPError, OSError, ValueError]
    try:
        import grpc
    except ImportError:  # pragma: no cover - grpcio ships with qdrant-client
        pass
    else:
        errors.append(grpc.RpcError)
    return tuple(errors)


@contextmanager
def _translated(where: str, what: str) -> Iterator[None]:
    """Turn driver errors into StoreUnavailable, so no caller sees qdrant-client exceptions."""
    try:
        yield
    except VectorsyncError:
        raise
    except _driver_errors() as exc:
        status = getattr(exc, "status_code", None)
        if isinstance(status, int) and 400 <= status < 500 and status not in (408, 429):
            raise StoreError(f"Qdrant at {where} refused to {what}: {exc}") from exc  # retrying will not help
        raise StoreUnavailable(f"Qdrant at {where} failed to {what}: {exc}") from exc


def _redacted(url: str) -> str:
    """``url`` without user:password, fit for messages and logs."""
    parts = urlsplit(url)
    if not parts.hostname:
        return url
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    host += f":{parts.port}" if parts.port else ""
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


def _is_server(url: str) -> bool:
    return url.startswith(("http://", "https://"))


# -- filters --------------------------------------------------------------------------


def split_filter(filter: Filter | None) -> tuple[models.Filter | None, Filter | None]:
    """Split ``filter`` into what Qdrant evaluates exactly and a residual checked in Python.

    Only a top-level conjunction is split; any other filter that Qdrant cannot
    express exactly goes to Python whole. Either part may be None.
    """
    if filter is None:
        return None, None
    if _native(filter):
        return _as_qdrant_filter(_condition(filter)), None
    parts = list(_conjuncts(filter))
    native = [part for part in parts if _native(part)]
    rest = [part for part in parts if not _native(part)]
    where = models.Filter(must=[_condition(part) for part in native]) if native else None
    return where, rest[0] if len(rest) == 1 else And(tuple(rest))


def _conjuncts(filter: Filter) -> Iterator[Filter]:
    """The parts of nested top-level ``And``s, flattened."""
    if isinstance(filter, And):
        for part in filter.parts:
            yield from _conjuncts(part)
    else:
        yield filter


def _exact_value(value: object) -> bool:
    """Whether Qdrant compares ``value`` exactly: strings and bools by match, numbers as f64."""
    return not isinstance(value, int) or isinstance(value, bool) or abs(value) <= EXACT_INT


def _native(filter: Filter) -> bool:
    """Whether Qdrant can evaluate ``filter`` with exactly the semantics of ``Filter.matches``."""
    if isinstance(filter, Eq):
        return _exact_value(filter.value)
    if isinstance(filter, AnyOf):
        return all(_exact_value(value) for value in filter.values)
    if isinstance(filter, Compare):
        return not isinstance(filter.value, str) and _exact_value(filter.value)
    if isinstance(filter, Not):
        return _native(filter.operand)
    if isinstance(filter, And | Or):
        # An empty `should` matches everything in Qdrant but nothing in Filter.matches.
        return (isinstance(filter, And) or bool(filter.parts)) and all(_native(p) for p in filter.parts)
    return False


def _key(field: str) -> str:
    return f"{METADATA_KEY}.{field}"


def _condition(filter: Filter) -> models.Condition:
    """The Qdrant condition for a filter that ``_native`` accepted."""
    if isinstance(filter, Eq):
        return _eq(filter.field, filter.value)
    if isinstance(filter, AnyOf):
        return models.Filter(should=[_eq(filter.field, value) for value in filter.values])
    if isinstance(filter, Compare):
        bound = float(filter.value)  # _native admits numbers only
        return models.FieldCondition(key=_key(filter.field), range=models.Range(**{filter.op: bound}))
    if isinstance(filter, Not):
        return models.Filter(must_not=[_condition(filter.operand)])
    if isinstance(filter, And):
        return models.Filter(must=[_condition(part) for part in filter.parts])
    if isinstance(filter, Or):
        return models.Filter(should=[_condition(part) for part in filter.parts])
    raise TypeError(f"no Qdrant condition for {filter!r}")  # _native refuses these first


def _eq(field: str, value: object) -> models.FieldCondition:
    """Equality, typed: a number matches ints and floats (1 == 1.0) but never a boolean."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return models.FieldCondition(key=_key(field), range=models.Range(gte=value, lte=value))
    return models.FieldCondition(key=_key(field), match=models.MatchValue(value=value))  # type: ignore[arg-type]


def _as_qdrant_filter(condition: models.Condition) -> models.Filter:
    return condition if isinstance(condition, models.Filter) else models.Filter(must=[condition])


def _excluding(where: models.Filter | None, point_ids: list[str]) -> models.Filter | None:
    """``where`` minus the points ``point_ids``."""
    if not point_ids:
        return where
    has_id: list[models.ExtendedPointId] = list(point_ids)
    return models.Filter(must=[where] if where else None, must_not=[models.HasIdCondition(has_id=has_id)])


# -- points ---------------------------------------------------------------------------


def _point(record: VectorRecord) -> models.PointStruct:
    payload = {"id": record.id, "text": record.text, "model": record.model, METADATA_KEY: record.metadata}
    return models.PointStruct(id=point_id(record.id), vector=list(record.embedding), payload=payload)


def _metadata(payload: dict[str, Any] | None) -> dict[str, Any]:
    found = (payload or {}).get(METADATA_KEY)
    return dict(found) if isinstance(found, dict) else {}


def _batches(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class QdrantCollection(Collection):
    """One Qdrant collection of the same name.

    ``replace_where`` is not atomic: Qdrant has no transactions. It upserts the
    new points first, then deletes the points matching the filter whose ids are
    not among the new ones; so readers never see "neither", but may briefly see
    both.
    """

    def __init__(
        self,
        name: str,
        *,
        client: QdrantClient,
        where: str,
        dimensions: int,
        metric: Metric,
        embedder: QueryEmbedder | None = None,
        ef_search: int | None = None,
    ):
        super().__init__(name, dimensions=dimensions, metric=metric, embedder=embedder)
        self._client = client
        self._where = where
        self._search_params = models.SearchParams(hnsw_ef=ef_search) if ef_search else None

    def _calling(self, what: str) -> AbstractContextManager[None]:
        return _translated(self._where, f"{what} in collection {self.name!r}")

    # -- writes -------------------------------------------------------------------------

    def _upsert(self, records: list[VectorRecord]) -> None:
        with self._calling("upsert points"):
            for batch in _batches(records, UPSERT_BATCH):
                self._client.upsert(self.name, points=[_point(r) for r in batch], wait=True)

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
        selector = models.FilterSelector(filter=_excluding(where, keep) or models.Filter())
        with self._calling("delete points"):
            self._client.delete(self.name, points_selector=selector, wait=True)

    # -- reads ----------------------------------------------------------------------------

    def _scroll(self, where: models.Filter | None) -> Iterator[models.Record]:
        """Every point matching ``where``, with its payload and without its vector, page by page."""
        offset: Any = None
        while True:
            with self._calling("scroll points"):
                points, offset = self._client.scroll(
                    self.name, scroll_filter=where, limit=SCROLL_PAGE, offset=offset,
                    with_payload=True, with_vectors=False,
                )
            yield from points
            if offset is None:
                return

    def _matching_ids(self, where: models.Filter | None, residual: Filter) -> list[str]:
        return [str(p.id) for p in self._scroll(where) if residual.matches(_metadata(p.payload))]

    def _count(self, filter: Filter | None) -> int:
        where, residual = split_filter(filter)
        if residual is not None:
            return len(self._matching_ids(where, residual))
        with self._calling("count points"):
            return self._client.count(self.name, count_filter=where, exact=True).count

    def _search(self, vector: list[float], filter: Filter | None, limit: int) -> list[VectorMatch]:
        where, residual = split_filter(filter)
        if residual is None:
            return [self._match(p) for p in self._query(vector, where, limit=limit, offset=0)]
        return self._search_checked(vector, where, residual, limit)

    def _search_checked(
        self, vector: list[float], where: models.Filter | None, residual: Filter, limit: int
    ) -> list[VectorMatch]:
        """Page through the closest points, best first, keeping those ``residual`` matches."""
        found: list[VectorMatch] = []
        offset, page = 0, max(4 * limit, 64)
        while len(found) < limit:
            points = self._query(vector, where, limit=page, offset=offset)
            found.extend(self._match(p) for p in points if residual.matches(_metadata(p.payload)))
            if len(points) < page:
                break
            offset, page = offset + page, max(page, min(4 * page, MAX_SEARCH_PAGE))
        return found[:limit]

    def _query(
        self, vector: list[float], where: models.Filter | None, *, limit: int, offset: int
    ) -> list[models.ScoredPoint]:
        with self._calling("search"):
            return self._client.query_points(
                self.name, query=vector, query_filter=where, limit=limit, offset=offset,
                with_payload=True, with_vectors=False, search_params=self._search_params,
            ).points

    def _match(self, point: models.ScoredPoint) -> VectorMatch:
        payload = point.payload or {}
        return VectorMatch(
            id=str(payload.get("id", point.id)), score=self._score(point.score),
            text=str(payload.get("text", "")), metadata=_metadata(payload),
        )

    def _score(self, raw: float) -> float:
        """Higher is closer: Qdrant gives the raw distance for EUCLID, the others are similarities."""
        return 1.0 / (1.0 + raw) if self.metric == "euclidean" else float(raw)


class QdrantStore(VectorStore):
    """Collections in a Qdrant server, or in qdrant-client's local mode (``:memory:`` or a folder)."""

    def __init__(
        self,
        url_or_location: str,
        *,
        dimensions: int,
        metric: Metric = "cosine",
        api_key: str | None = None,
        index_fields: Iterable[str] = (),
        embedder: QueryEmbedder | None = None,
        hnsw_m: int | None = None,
        hnsw_ef_construction: int | None = None,
        ef_search: int | None = None,
    ):
        super().__init__(dimensions=dimensions, metric=metric, embedder=embedder)
        if not isinstance(url_or_location, str) or not url_or_location:
            raise ConfigError(
                f"Qdrant location {url_or_location!r} is not allowed: use an http(s) URL, ':memory:' "
                "or a folder (vectors.url)"
            )
        self.url = _redacted(url_or_location)
        self.index_fields = tuple(dict.fromkeys((*ALWAYS_INDEXED, *map(check_field, index_fields))))
        self._server = _is_server(url_or_location)
        self._hnsw = models.HnswConfigDiff(m=hnsw_m, ef_construct=hnsw_ef_construction)
        self._ef_search = ef_search
        self._client = self._connect(url_or_location, api_key)

    def __repr__(self) -> str:
        return f"<QdrantStore {self.url} {self.dimensions}-d {self.metric}>"

    @classmethod
    def from_settings(cls, settings: Settings, *, embedder: QueryEmbedder | None = None) -> QdrantStore:
        """The Qdrant store ``[vectors]`` names; the key comes from VECTORSYNC_VECTORS__KEY."""
        vectors = settings.vectors
        if not vectors.url:
            raise ConfigError("vectors.url is required for the qdrant store (VECTORSYNC_VECTORS__URL)")
        return cls(
            vectors.url,
            dimensions=vectors.dimensions,
            metric=vectors.metric,
            api_key=vectors.key.get_secret_value() if vectors.key else None,
            index_fields=vectors.index_fields,
            embedder=embedder,
            hnsw_m=vectors.hnsw_m,
            hnsw_ef_construction=vectors.hnsw_ef_construction,
            ef_search=vectors.ef_search,
        )

    def _connect(self, location: str, api_key: str | None) -> QdrantClient:
        """A client for a server (no request made yet) or a local-mode client."""
        with _translated(self.url, "open"):
            if self._server:
                return QdrantClient(url=location, api_key=api_key, check_compatibility=False)
            if api_key:
                raise ConfigError("vectors.key is set but Qdrant's local mode takes no key: unset it")
            if location == ":memory:":
                return QdrantClient(location=":memory:")
            try:
                return QdrantClient(path=location)
            except RuntimeError as exc:  # the folder is locked by another client
                raise StoreUnavailable(f"Qdrant at {self.url} cannot be opened: {exc}") from exc

    def close(self) -> None:
        """Close the client; a local folder is unlocked for the next store."""
        with _translated(self.url, "close"):
            self._client.close()

    # -- hooks ----------------------------------------------------------------------------

    def _ensure(self, name: str) -> Collection:
        with _translated(self.url, f"open collection {name!r}"):
            if not self._client.collection_exists(name):
                self._create(name)
            params = self._client.get_collection(name).config.params.vectors
        self._check_params(name, params)
        if self._server:
            self._index(name)
        return QdrantCollection(
            name, client=self._client, where=self.url, dimensions=self.dimensions, metric=self.metric,
            embedder=self.embedder, ef_search=self._ef_search if self._server else None,
        )

    def _create(self, name: str) -> None:
        """Create ``name``; losing a race with another process that created it is fine."""
        params = models.VectorParams(size=self.dimensions, distance=_DISTANCES[self.metric])
        try:
            self._client.create_collection(name, vectors_config=params, hnsw_config=self._hnsw)
        except _driver_errors():
            if not self._client.collection_exists(name):
                raise

    def _check_params(self, name: str, params: Any) -> None:
        """An existing collection of another size or distance is a ConfigError naming both."""
        fix = "drop it or use another collection name"
        if not isinstance(params, models.VectorParams):
            raise ConfigError(
                f"Qdrant collection {name!r} holds named vectors; vectorsync needs one unnamed vector: {fix}"
            )
        if params.size != self.dimensions:
            raise ConfigError(
                f"Qdrant collection {name!r} holds {params.size}-dimensional vectors; settings say "
                f"{self.dimensions} (vectors.dimensions): {fix}"
            )
        if params.distance != _DISTANCES[self.metric]:
            raise ConfigError(
                f"Qdrant collection {name!r} uses {params.distance.value} distance; settings say "
                f"{self.metric} (vectors.metric): {fix}"
            )

    def _index(self, name: str) -> None:
        """Keyword indexes on record_id and the configured fields (server only; idempotent).

        A keyword index serves string equality only; Qdrant checks other conditions
        on the field against the stored payload, so typed matching is unchanged.
        """
        with _translated(self.url, f"index collection {name!r}"):
            for field in self.index_fields:
                self._client.create_payload_index(
                    name, _key(field), field_schema=models.PayloadSchemaType.KEYWORD, wait=True
                )

    def _drop(self, name: str) -> None:
        with _translated(self.url, f"drop collection {name!r}"):
            self._client.delete_collection(name)

    def _list(self) -> list[str]:
        with _translated(self.url, "list collections"):
            return [c.name for c in self._client.get_collections().collections]
