"""What a producer refuses before anything is sent: a collection the settings do not declare, a read of one
whose records are pushed, a push to one with a source, a record id no table can hold, a bad document version.
Each refusal is a ConfigError naming the value and the fix."""

from __future__ import annotations

from store.errors import ConfigError
from store.settings import CollectionSettings, Settings
from store.vectors.records import check_collection_name, check_record_id

__all__ = ["checked_version", "declared", "pushed", "record_id_of", "record_label"]


def record_label(record_id: object) -> str:
    """``record_id`` as a string: a non-empty string or an integer, else a ConfigError."""
    if isinstance(record_id, bool) or not isinstance(record_id, str | int) or record_id == "":
        raise ConfigError(f"record id {record_id!r} is not allowed: use a non-empty string or an integer")
    return str(record_id)


def record_id_of(settings: Settings, record_id: object) -> str:
    """``record_id`` as a task carries it: ``record_label``'s, within ``limits.max_id_chars``."""
    return check_record_id(record_label(record_id), max_chars=settings.limits.max_id_chars)


def declared(settings: Settings, collection: str, *, read: bool = False) -> str:
    """``collection``, checked against the settings when they declare any collection (a producer whose
    settings declare none cannot tell, and sends). ``read``: it must have a source to read."""
    collection = check_collection_name(collection)
    known = settings.collections
    if known and collection not in known:
        raise ConfigError(
            f"collection {collection!r} is not declared in the settings (declared: "
            f"{', '.join(sorted(known))}): check the name, or add [collections.{collection}]"
        )
    if read and collection in known and known[collection].source.kind == "push":
        raise ConfigError(
            f"collection {collection!r} has its records pushed (source.kind = 'push'): there is "
            "no source to read, so nothing to index by id or reindex; push the "
            "documents again (index_document)"
        )
    return collection


def pushed(settings: Settings, collection: str) -> CollectionSettings | None:
    """The collection's settings, if any. A collection the settings give a source reads its records there:
    pushing to it is a mistake; one the settings do not declare too, when they declare any (``declared``)."""
    config = settings.collections.get(declared(settings, collection))
    if config is not None and config.source.kind != "push":
        raise ConfigError(
            f"collection {collection!r} reads its records from its {config.source.kind} source; "
            "index_document and delete_document are for collections whose records are pushed "
            f"(collections.{collection}.source.kind = 'push'): use index_record for this one"
        )
    return config


def checked_version(version: object, label: str) -> int:
    """A document's ``version`` as given: a positive integer below 2**63, else a ConfigError."""
    if isinstance(version, bool) or not isinstance(version, int) or not 0 < version < 2**63:
        raise ConfigError(
            f"version {version!r} of document {label!r} is not allowed: pass a positive integer "
            "below 2**63 that grows with each send of the document (or leave it out)"
        )
    return version
