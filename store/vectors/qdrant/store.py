"""The Qdrant store: collections in a Qdrant server, or in qdrant-client's local mode.

``url`` is an http(s) address of a Qdrant server, or ``:memory:`` or a folder
for qdrant-client's local mode (tests, one process). Local mode builds no
payload indexes, so none are asked for there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from qdrant_client import QdrantClient, models

from store.errors import ConfigError, StoreUnavailable
from store.settings import VectorSettings, default
from store.settings.section import values_for
from store.settings.urls import without_credentials
from store.vectors.base import DEFAULT_METRIC, Collection, Metric, QueryEmbedder, VectorStore
from store.vectors.filters import check_field
from store.vectors.qdrant.client import driver_errors, is_server, translated
from store.vectors.qdrant.filters import payload_key
from store.vectors.qdrant.keywords import KEYWORDS, KEYWORDS_KEY, keyword_config, pin, pinned, upgrade
from store.vectors.qdrant.points import TEXT_HASH, QdrantCollection
from store.vectors.rules import Declared, Rules, settle, shown_by, terms_by

if TYPE_CHECKING:
    from store.settings import Settings

__all__ = ["ALWAYS_INDEXED", "QdrantStore", "QdrantTuning"]

#: The key of a collection's metadata that holds its rules (``store.vectors.rules``).
RULES_KEY = "vectorsync_rules"

#: Metadata fields always indexed on a server: the pipeline deletes and replaces by record_id.
ALWAYS_INDEXED = ("record_id",)

_DISTANCES: dict[str, models.Distance] = {
    "cosine": models.Distance.COSINE,
    "dot": models.Distance.DOT,
    "euclidean": models.Distance.EUCLID,
}


@dataclass(frozen=True)
class QdrantTuning:
    """How a Qdrant store builds and searches its collections: the ``[vectors]`` settings of the same names."""

    hnsw_m: int = default(VectorSettings, "hnsw_m")
    hnsw_ef_construction: int = default(VectorSettings, "hnsw_ef_construction")
    ef_search: int = default(VectorSettings, "ef_search")
    index_fields: tuple[str, ...] = ()

    @classmethod
    def from_settings(cls, vectors: VectorSettings) -> QdrantTuning:
        """The tuning ``[vectors]`` describes."""
        return cls(**{**values_for(cls, vectors), "index_fields": tuple(vectors.index_fields)})


class QdrantStore(VectorStore):
    """Collections in a Qdrant server, or in qdrant-client's local mode (``:memory:`` or a folder)."""

    def __init__(
        self,
        url_or_location: str,
        *,
        dimensions: int,
        metric: Metric = DEFAULT_METRIC,
        api_key: str | None = None,
        embedder: QueryEmbedder | None = None,
        tuning: QdrantTuning = QdrantTuning(),
    ):
        super().__init__(dimensions=dimensions, metric=metric, embedder=embedder)
        if not isinstance(url_or_location, str) or not url_or_location:
            raise ConfigError(
                f"Qdrant location {url_or_location!r} is not allowed: use an http(s) URL, ':memory:' "
                "or a folder (vectors.url)"
            )
        self.url = without_credentials(url_or_location)
        self.index_fields = tuple(dict.fromkeys((*ALWAYS_INDEXED, *map(check_field, tuning.index_fields))))
        self._server = is_server(url_or_location)
        self._hnsw = models.HnswConfigDiff(m=tuning.hnsw_m, ef_construct=tuning.hnsw_ef_construction)
        #: What its collections' vector searches ask of the HNSW index (on a server; local mode is sent nothing).
        self.search_params = (
            models.SearchParams(hnsw_ef=tuning.ef_search) if self._server and tuning.ef_search else None
        )
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
            embedder=embedder,
            tuning=QdrantTuning.from_settings(vectors),
        )

    def _connect(self, location: str, api_key: str | None) -> QdrantClient:
        """A client for a server (no request made yet) or a local-mode client."""
        with translated(self.url, "open"):
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
        with translated(self.url, "close"):
            self._client.close()

    # -- hooks ----------------------------------------------------------------------------

    def _ensure(self, name: str, declared: Declared | None) -> Collection:
        with translated(self.url, f"open collection {name!r}"):
            created = not self._client.collection_exists(name)
            if created:
                self._create(name)
            info = self._client.get_collection(name)
        self._check_params(name, info.config.params.vectors)
        stored = _stored_rules(info.config.metadata, name)
        rules = settle(name, stored, declared, shown=None if created else _shown_rules(info.config.metadata))
        with translated(self.url, f"give collection {name!r} its keyword terms"):
            if created:
                pin(self._client, name, terms_by(rules), None)
            avgdl = upgrade(self._client, name, terms_by(rules))
            if stored is None and (created or declared is not None):
                self._client.update_collection(name, metadata={RULES_KEY: rules.to_json()})
        if self._server:
            self._index(name)
        collection = QdrantCollection(self, name)
        collection.avgdl = avgdl
        collection.rules = rules
        return collection

    def _stored_rules(self, name: str) -> Rules | None:
        with translated(self.url, f"read the rules of collection {name!r}"):
            return _stored_rules(self._client.get_collection(name).config.metadata, name)

    def _set_rules(self, name: str, rules: Rules) -> int:
        with translated(self.url, f"set the rules of collection {name!r}"):
            before = pinned(self._client, name).get("analyzer")
            avgdl = upgrade(self._client, name, terms_by(rules))
            self._client.update_collection(name, metadata={RULES_KEY: rules.to_json()})
            analyzed = pinned(self._client, name).get("analyzer") != before and rules.keywords
            count = self._client.count(name, exact=True).count if analyzed else 0
        if name in self._collections:
            self._collections[name].avgdl = avgdl  # type: ignore[attr-defined]
        return count

    def _create(self, name: str) -> None:
        """Create ``name``; losing a race with another process that created it is fine."""
        params = models.VectorParams(size=self.dimensions, distance=_DISTANCES[self.metric])
        try:
            self._client.create_collection(
                name, vectors_config=params, hnsw_config=self._hnsw, sparse_vectors_config={KEYWORDS: keyword_config()}
            )
        except driver_errors():
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
        """Keyword indexes on record_id, the configured fields, and the text hash and model the vectors stored for a
        text are found by (``vectors_by_hash``); server only, idempotent. Points written before the text hash was
        kept have none: they are not found by it until written again.

        A keyword index serves string equality only; Qdrant checks other conditions
        on the field against the stored payload, so typed matching is unchanged.
        """
        with translated(self.url, f"index collection {name!r}"):
            for key in [*(payload_key(f) for f in self.index_fields), TEXT_HASH, "model"]:
                self._client.create_payload_index(name, key, field_schema=models.PayloadSchemaType.KEYWORD, wait=True)

    def _drop(self, name: str) -> None:
        with translated(self.url, f"drop collection {name!r}"):
            self._client.delete_collection(name)

    def _reset(self, name: str) -> None:
        """Delete every point (an empty filter matches all); the collection, its parameters and payload indexes
        stay."""
        with translated(self.url, f"empty collection {name!r}"):
            self._client.delete(name, points_selector=models.FilterSelector(filter=models.Filter()), wait=True)
            held = self._collections.get(name)
            rules = held.rules if held is not None else self.rules_of(name)
            pin(self._client, name, terms_by(rules), None)  # the next terms pin anew
        if name in self._collections:
            self._collections[name].avgdl = None  # type: ignore[attr-defined]

    def _list(self) -> list[str]:
        with translated(self.url, "list collections"):
            return [c.name for c in self._client.get_collections().collections]


def _stored_rules(metadata: dict[str, Any] | None, name: str) -> Rules | None:
    """The rules kept in a collection's metadata; None when it holds none (made before rules were kept)."""
    found = (metadata or {}).get(RULES_KEY)
    return None if found is None else Rules.from_json(found, where=f"Qdrant collection {name!r}")


def _shown_rules(metadata: dict[str, Any] | None) -> Rules:
    """What a collection made before rules were kept shows: its pinned analyzer, if any."""
    identity = ((metadata or {}).get(KEYWORDS_KEY) or {}).get("analyzer")
    return shown_by(identity if isinstance(identity, str) else None)
