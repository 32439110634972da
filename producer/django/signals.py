"""Saves and deletes of watched models, enqueued once their transaction commits.

``post_save`` and ``post_delete`` of a watched model hand ``index_record(collection, pk)`` to
``transaction.on_commit`` on the database the write used: Django runs it after the outermost commit, drops
it when the transaction (or the savepoint it was made in) rolls back, and runs it at once in autocommit.
The worker reads the row by its key: a row that is gone has its chunks deleted, so a delete enqueues the same
task as a save. A send that fails after the commit is logged, not raised (the write has happened); the
reconcile sweep picks the record up.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any, TypeVar

from django.core.exceptions import ImproperlyConfigured
from django.db import models, transaction
from django.db.models.signals import post_delete, post_save

from store.errors import ConfigError
from store.process.defaults import default_producer
from store.settings.collection_names import check_declared_name

__all__ = ["indexed", "watch", "watched"]

log = logging.getLogger(__name__)
M = TypeVar("M", bound=type[models.Model])

#: Each watched model and the collections it is indexed into.
_watched: dict[type[models.Model], tuple[str, ...]] = {}


def indexed(*collections: str) -> Callable[[M], M]:
    """Class decorator: index this model into ``collections`` (``watch``)."""

    def mark(model: M) -> M:
        watch(model, collections)
        return model

    return mark


def watch(model: type[models.Model], collections: Iterable[str]) -> None:
    """Enqueue ``index_record(collection, pk)`` for each of ``collections`` when a ``model`` row is saved or
    deleted; watching again adds collections. Raises ImproperlyConfigured for an abstract model or a bad name."""
    names = (collections,) if isinstance(collections, str) else tuple(collections)
    label = model._meta.label
    if model._meta.abstract:
        raise ImproperlyConfigured(
            f"{label} is abstract, so it sends no signals: index the models that inherit from it"
        )
    if not names:
        raise ImproperlyConfigured(f"{label} is indexed into no collection: name one, e.g. indexed('notes')")
    try:
        names = tuple(check_declared_name(name) for name in names)
    except ConfigError as exc:
        raise ImproperlyConfigured(f"{label}: {exc}") from None
    _watched[model] = tuple(dict.fromkeys(_watched.get(model, ()) + names))
    post_save.connect(_saved, sender=model, weak=False, dispatch_uid=f"vectorsync.saved:{label}")
    post_delete.connect(_deleted, sender=model, weak=False, dispatch_uid=f"vectorsync.deleted:{label}")


def watched() -> dict[type[models.Model], tuple[str, ...]]:
    """Every watched model and its collections."""
    return dict(_watched)


def _saved(sender: type[models.Model], instance: models.Model, using: str, **kwargs: Any) -> None:
    _enqueue(sender, instance.pk, using)


def _deleted(sender: type[models.Model], instance: models.Model, using: str, **kwargs: Any) -> None:
    _enqueue(sender, instance.pk, using)  # read now: Django clears the pk once the delete is done


def _enqueue(model: type[models.Model], pk: Any, using: str) -> None:
    record_id = pk if isinstance(pk, int) else str(pk)
    for collection in _watched.get(model, ()):
        transaction.on_commit(partial(_send, collection, record_id), using=using)


def _send(collection: str, record_id: str | int) -> None:
    try:
        default_producer().index_record(collection, record_id)
    except Exception:
        log.exception(
            "enqueue of %s %s after commit failed; the reconcile sweep will pick the record up", collection, record_id
        )
