"""The sweeper: which records one generation's index does not follow (new, changed, or gone from the source),
for reconcile sweeps and a reindex's fan-out, read and hashed only where their stamps moved; and a ledger
forgotten when its collection was lost."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from store.state.ledger import LedgerEntry
from worker.pipeline.batch import BatchResult
from worker.pipeline.core import Pipeline
from worker.sources.base import SourceRecord

__all__ = ["Sweeper"]

log = logging.getLogger(__name__)


class Sweeper:
    """Compares one generation's source with its ledger, over its ``Pipeline``."""

    def __init__(self, pipeline: Pipeline) -> None:
        self.pipeline = pipeline

    def stale_ids(
        self, stamped: Sequence[tuple[str, str]], *, known: Mapping[str, LedgerEntry] | None = None
    ) -> list[str]:
        """Which of these (id, stamp) pairs the index does not follow: new, changed or gone, in their order.

        For reconcile sweeps and reindexes. An id the ledger does not hold is new: stale without a read. A
        record whose stamp holds (``stamp_holds``) is taken as unchanged without reading it, so only records
        whose stamp moved (or that keep no stamp) are read and hashed. ``known``: the ledger entries of these
        ids, when the caller has them already.
        """
        pipeline = self.pipeline
        ledger = known if known is not None else pipeline.ledger.entries(pipeline.name, [i for i, _ in stamped])
        moved = [i for i, stamp in stamped if i in ledger and not self.stamp_holds(ledger[i], stamp)]
        unreadable = BatchResult()
        current = pipeline.fetch(moved, unreadable) if moved else {}
        # A record the source cannot give is stale too: its batch reads it again and records why it fails.
        stale = {
            i
            for i in moved
            if i in unreadable.failed or i not in current or not self._ledger_holds_record(ledger[i], current[i])
        }
        return [i for i, _ in stamped if i not in ledger or i in stale]

    def stamp_holds(self, known: LedgerEntry, stamp: str) -> bool:
        """Whether the source's ``stamp`` is the one ``known`` was indexed at, by the chain's first model."""
        return bool(stamp) and known.stamp == stamp and known.model == self.pipeline.embeddings.space

    def forget_if_lost(self) -> bool:
        """When the collection is empty but the ledger says records are indexed (the collection was dropped,
        or its store lost its data), forget the ledger so that every record is indexed again. True if so."""
        pipeline = self.pipeline
        if not pipeline.collection.is_empty() or not pipeline.ledger.record_ids(pipeline.name):
            return False
        log.warning(
            "collection %s is empty but its ledger is not: forgetting the ledger, so everything is indexed again",
            pipeline.name,
        )
        pipeline.ledger.forget_collection(pipeline.name)
        return True

    def stale(self, *, page_size: int) -> list[str]:
        """Every id the index does not follow, for a reconcile sweep: new, changed, or gone from the source.

        Pages through the source's ids with their stamps; only records whose stamp
        moved are read and hashed (``stale_ids``); ledger ids the source no longer
        has are gone (their batch deletes them).
        """
        pipeline = self.pipeline
        stale: list[str] = []
        seen: set[str] = set()
        after: str | None = None
        while stamped := pipeline.source.page_stamps(after=after, limit=page_size):
            stale.extend(self.stale_ids(stamped))
            seen.update(record_id for record_id, _ in stamped)
            after = stamped[-1][0]
        stale.extend(sorted(pipeline.ledger.record_ids(pipeline.name) - seen))
        return stale

    def _ledger_holds_record(self, known: LedgerEntry, record: SourceRecord) -> bool:
        """Whether the ledger's entry is this source record as it reads now (``Pipeline.holds``)."""
        try:
            return self.pipeline.holds(known, self.pipeline.content_hash(record))
        except Exception:  # a record that cannot be hashed is not current: its batch says why
            return False
