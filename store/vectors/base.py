"""The ``VectorStore`` seam: a place that holds collections, and the rules each one keeps.

Backends subclass it and ``store.vectors.collection.Collection`` and fill the ``_``-prefixed hooks; every public
method validates its input first, so a bad call raises ConfigError and writes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import replace

from store.errors import ConfigError
from store.settings import CollectionSettings, LimitSettings, SearchSettings
from store.vectors.collection import (
    DEFAULT_LIMIT,
    DEFAULT_METRIC,
    MAX_LIMIT,
    METRICS,
    Collection,
    Metric,
    QueryEmbedder,
)
from store.vectors.indexed import IndexedFields
from store.vectors.records import check_collection_name
from store.vectors.refusals import missing, no_keywords
from store.vectors.rules import Declared, Rules
from store.vectors.tenancy import required_fields

#: Seconds an open collection's rules are trusted before they are read again from where it is stored.
RULES_REFRESH = 5.0

__all__ = [
    "DEFAULT_LIMIT",
    "DEFAULT_METRIC",
    "MAX_LIMIT",
    "Collection",
    "Metric",
    "QueryEmbedder",
    "VectorStore",
    "missing",
    "no_keywords",
]


class VectorStore:
    """A place that holds collections: pgvector, Qdrant or memory."""

    def __init__(self, *, dimensions: int, metric: Metric = DEFAULT_METRIC, embedder: QueryEmbedder | None = None):
        if isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions < 1:
            raise ConfigError(f"dimensions {dimensions!r} is not allowed: use a positive whole number")
        if metric not in METRICS:
            raise ConfigError(f"metric {metric!r} is not allowed: use one of {', '.join(METRICS)}")
        self.dimensions = dimensions
        self.metric: Metric = metric
        self.embedder = embedder
        #: Caps on input (filters, Qdrant's residual scans), given to every collection.
        self.limits = LimitSettings()
        #: Declared indexed fields per collection name (``[collections.NAME.index] fields``).
        self.indexed: dict[str, IndexedFields] = {}
        #: The rules this process's settings state, per collection name: checked against the stored ones.
        self.declared: dict[str, Declared] = {}
        #: Search settings per collection name (``[collections.NAME.search]``); others take the defaults.
        self.search_settings: dict[str, SearchSettings] = {}
        self._collections: dict[str, Collection] = {}

    def get_collection(self, name: str, *, create: bool = False) -> Collection:
        """The collection ``name``, kept open for the next call: one of the two ways to a collection (the other is
        ``ensure_collection``). A missing one is created empty with ``create`` (a declared collection, a writer's),
        else a ConfigError naming the fix: a read never makes a table for a typo. An open collection's rules are
        read again at most every ``RULES_REFRESH`` seconds, so a change (``vectorsync collections set``) reaches
        every process that holds it open. Raises StoreUnavailable."""
        found = self._collections.get(name)
        if found is not None:
            if time.monotonic() - found.rules_read_at > RULES_REFRESH:
                self._refresh(found)
            return found
        if not create and not self.has_collection(name):
            raise ConfigError(missing(name, self._list()))
        return self.ensure_collection(name)

    def has_collection(self, name: str) -> bool:
        """Whether the store holds the collection ``name``. Raises ConfigError for a bad name, StoreUnavailable."""
        return self._exists(check_collection_name(name))  # asked each time: another process may have dropped it

    def reset_collection(self, name: str) -> None:
        """Delete every record of ``name`` and keep the collection: its schema, indexes and settings.

        A missing collection is a ConfigError (nothing is created). Raises StoreUnavailable.
        """
        if not self.has_collection(name):
            raise ConfigError(missing(name, self._list()))
        self._reset(name)

    def ensure_collection(self, name: str) -> Collection:
        """Create ``name`` if missing, with the rules this process declares; an existing one opens with its own
        rules (a declared rule it does not hold, or another size, is a ConfigError). Asked of the store each time,
        unlike ``get_collection``'s open one: what a run's start and ``init`` ask, so a collection another process
        dropped is made again. It is then kept open for ``get_collection``."""
        collection = self._ensure(check_collection_name(name), self.declared.get(name))
        collection.limits = self.limits
        collection.search_settings = _held(self.search_settings_of(name), collection.rules)
        collection.declare_indexes(self.indexed.get(name, {}))
        self._collections[name] = collection
        return collection

    def declare(self, name: str, settings: CollectionSettings, *, held: Rules | None = None) -> None:
        """What ``[collections.NAME]`` says of ``name``: its indexed fields, its search settings, and the rules it
        states (checked against the collection's own when it is opened); ``open_store`` does it for each.
        ``held``: the rules it holds where the settings state none (a new generation: its collection's)."""
        if settings.index.fields:
            self.indexed.setdefault(check_collection_name(name), settings.index.fields)
        self.search_settings[check_collection_name(name)] = settings.search
        stated = Declared.from_settings(settings)
        self._restate(name, stated if held is None else stated.over(held))

    def require_filter(self, name: str, fields: Iterable[str]) -> None:
        """State that every search of ``name`` must pin each of ``fields`` to one value, as ``[collections.NAME]
        required_filter`` does: a new collection holds it, an existing one must hold it already
        (``set_rules`` changes it)."""
        stated = self.declared.get(check_collection_name(name)) or Declared()
        self._restate(name, replace(stated, required_filter=required_fields(fields)))

    @property
    def required_filters(self) -> dict[str, tuple[str, ...]]:
        """The required filters this process's settings state, per collection name."""
        return {n: d.required_filter for n, d in self.declared.items() if d.required_filter is not None}

    def configure_search(self, name: str, settings: SearchSettings) -> None:
        """Search ``name`` as ``settings`` say (``[collections.NAME.search]``): its mode and fusion; its keyword
        index and language are the collection's rules, stated here as ``declare`` states them."""
        stated = self.declared.get(check_collection_name(name)) or Declared()
        search = Declared.from_settings(CollectionSettings(search=settings))
        self.search_settings[name] = settings
        self._restate(name, replace(stated, keywords=search.keywords, language=search.language))

    def rules_of(self, name: str) -> Rules:
        """The rules the collection ``name`` holds. Raises ConfigError (missing), StoreUnavailable."""
        return self.get_collection(name).rules

    def set_rules(self, name: str, **changes: object) -> tuple[Rules, Rules, int]:
        """Change the rules ``name`` holds (``required_filter``, ``keywords``, ``language``): the keyword index is
        built or emptied as they say (nothing is re-embedded). Returns the rules before and after and the chunks
        whose text was analyzed again. Raises ConfigError (missing; a bad value), StoreUnavailable."""
        stated = self.declared.pop(check_collection_name(name), None)  # settings may state the new rules already
        self._collections.pop(name, None)
        before = self.get_collection(name).rules
        after = Declared(**changes).rules(before)  # type: ignore[arg-type]
        analyzed = self._set_rules(name, after) if after != before else 0
        if stated is not None:  # what this process stated of the changed rules gives way to them
            self.declared[name] = replace(stated, **dict.fromkeys(changes))
        self._collections.pop(name, None)
        self.get_collection(name)
        return before, after, analyzed

    def _refresh(self, collection: Collection) -> None:
        stored = self._stored_rules(collection.name)
        collection.rules_read_at = time.monotonic()
        if stored is not None and stored != collection.rules:
            collection.rules = stored
            collection.search_settings = _held(collection.search_settings, stored)

    def _restate(self, name: str, declared: Declared) -> None:
        self.declared[check_collection_name(name)] = declared
        if name in self._collections:
            self.ensure_collection(name)

    def search_settings_of(self, name: str) -> SearchSettings:
        """The search settings of collection ``name`` (the defaults unless ``configure_search`` said otherwise)."""
        return self.search_settings.get(name) or SearchSettings()

    def drop_collection(self, name: str) -> None:
        """Delete the collection ``name`` and everything in it, if it exists."""
        self._drop(check_collection_name(name))
        self._collections.pop(name, None)

    def list_collections(self) -> list[str]:
        """Names of the collections this store holds, sorted."""
        return sorted(self._list())

    def close(self) -> None:
        """Release connections; the store is not used afterwards."""

    def __enter__(self) -> VectorStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- backend hooks ----------------------------------------------------------------

    def _ensure(self, name: str, declared: Declared | None) -> Collection:
        """Open ``name``, created if missing; its ``rules`` settled (``store.vectors.rules.settle``) and recorded
        with it when it holds none yet and ``declared`` is not None (or it is new)."""
        raise NotImplementedError

    def _stored_rules(self, name: str) -> Rules | None:
        """The rules stored with ``name`` now (None: none, or the backend keeps them in the collection object)."""
        return None

    def _set_rules(self, name: str, rules: Rules) -> int:
        """Record ``rules`` with ``name`` and build or empty its keyword index to match; the chunks analyzed."""
        raise NotImplementedError

    def _drop(self, name: str) -> None:
        raise NotImplementedError

    def _reset(self, name: str) -> None:
        """Delete every record of the existing collection ``name``, keeping its schema and indexes."""
        raise NotImplementedError

    def _exists(self, name: str) -> bool:
        return name in self._list()

    def _list(self) -> list[str]:
        raise NotImplementedError


def _held(settings: SearchSettings, rules: Rules) -> SearchSettings:
    """A process's search settings over a collection: its keyword index and language are the collection's."""
    return settings.model_copy(update={"keywords": rules.keywords, "language": rules.language})
