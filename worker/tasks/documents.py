"""Pushed documents: a push's work (index its content, or delete it), dropping its kept copy once it is done, and
sending again the pushes a sweep finds lost (``store.broker.pushes``)."""

from __future__ import annotations

import dataclasses
import itertools
import logging
import math
import time

from store.broker.pushes import Push
from store.broker.queues import sent_headers
from store.connect.redis import unavailable
from store.contract import INDEX_DOCUMENT, LIVE_QUEUE
from worker.pipeline.batch import BatchResult, Document
from worker.runtime.app import app
from worker.runtime.context import context
from worker.runtime.delivery import send
from worker.tasks.flow import Batch, Work

__all__ = ["SEND_AT_MOST", "Pushed", "is_pushed", "send_lost"]

log = logging.getLogger(__name__)

#: Pushes one sweep sends again at most; the next sweep sends more.
SEND_AT_MOST = 1000


class Pushed(Work):
    """A pushed document's work: index its content, or delete it (``deleted``)."""

    def __init__(self, collection: str, document: Document, *, deleted: bool) -> None:
        super().__init__(Batch(collection, [document.id]))
        self.document, self.deleted, self.parked = document, deleted, False

    def __call__(self) -> dict[str, BatchResult]:
        collection, document = self.batch.collection, self.document
        if self.deleted:
            return context().written(
                collection,
                [document.id],
                lambda jobs: jobs.documents.delete_documents([document.id], version=document.version),
            )
        return context().written(collection, [document.id], lambda jobs: jobs.documents.index_documents([document]))

    def given_up(self) -> None:
        """It kept killing its worker (``worker.max_redeliveries``): keep its copy, never to be sent again."""
        self.parked = True

    def settle(self) -> None:
        """The push is indexed, deleted or superseded: its kept copy goes, unless a newer one is kept. One given
        up keeps its content in Redis instead (its failures row says so), sent by no sweep, until a newer push
        of the document replaces it."""
        document, pushes = self.document, context().pushes()
        if not self.parked:
            pushes.settle(self.batch.collection, document.id, document.version)
            return
        text = None if self.deleted else document.text
        with unavailable(f"the push of {document.id} could not be parked", "its failures row names it"):
            pushes.keep(
                self.batch.collection, Push(document.id, text, dict(document.metadata), document.version, math.inf)
            )


def is_pushed(collection: str) -> bool:
    """Whether ``collection`` is declared with pushed documents (no source to read)."""
    declared = context().settings.collections.get(collection)
    return declared is not None and declared.source.kind == "push"


def send_lost(collection: str, *, at_most: int = SEND_AT_MOST) -> int:
    """Send again the pushes of ``collection`` kept for longer than ``broker.visibility_timeout`` (lost: a
    message a dead worker held is back by then), ``at_most`` of them, each marked sent now; how many. Read
    lazily, so a sweep behind a long backlog holds one push at a time and sends a bounded number of duplicates.
    Raises StoreUnavailable."""
    ctx = context()
    pushes, sent = ctx.pushes(), 0
    with unavailable(f"the kept pushes of {collection} could not be read", "the next sweep sends them"):
        for push in itertools.islice(
            pushes.lost(collection, older_than=ctx.settings.broker.visibility_timeout), at_most
        ):
            pushes.keep(collection, dataclasses.replace(push, sent_at=time.time()))
            args = (collection, push.id, push.text, push.metadata, push.version)
            send(app.tasks[INDEX_DOCUMENT], args=args, queue=LIVE_QUEUE, headers=sent_headers())
            sent += 1
    if sent:
        log.warning("sent again %d pushes of %s that no worker had indexed after they were sent", sent, collection)
    return sent
