"""The sampled verify Celery beat sends per collection every ``worker.verify_seconds``: ``worker.verify_sample``
records drawn at random, compared with what the store holds (``store.verify``), never repaired here; the verdict
is kept where every worker's metrics endpoint exports it (``vectorsync_drifted_records``)."""

from __future__ import annotations

import logging

from celery import Task

from store.contract import VERIFY
from store.verify.verdicts import Verdict, Verdicts
from worker.repair.chunk_reading import ChunkReading
from worker.runtime.app import app
from worker.runtime.context import context

__all__ = ["verify_sample"]

log = logging.getLogger(__name__)


@app.task(bind=True, name=VERIFY)
def verify_sample(self: Task, collection: str) -> dict[str, int]:
    """Verify ``worker.verify_sample`` records of ``collection`` drawn at random, without repairing, and keep the
    verdict (``vectorsync_drifted_records``). A store that cannot be reached waits for the next beat."""
    ctx = context()
    settings = ctx.settings
    with ChunkReading(ctx.client) as reading:
        report = ctx.client.verify(collection, sample=settings.worker.verify_sample, source=reading)
    verdict = Verdict.of(report)
    verdicts = Verdicts(settings.cache_url, network=settings.network)
    try:
        verdicts.keep(collection, verdict)
    finally:
        verdicts.close()
    (log.warning if verdict.drifted else log.info)(
        "verify of %s: %d of %d sampled records drifted%s",
        collection,
        verdict.drifted,
        verdict.checked,
        f"; `vectorsync verify {collection} --repair` fixes them" if verdict.drifted else "",
    )
    return {"drifted": verdict.drifted, "checked": verdict.checked}
