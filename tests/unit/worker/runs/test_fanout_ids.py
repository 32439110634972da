"""Issue 48, defect 1, in one process: the fan-out hands the ledger no id ``check_record_id`` refuses. A NUL or a
lone surrogate reached the ledger's lookup (``changed_ids``), which PostgreSQL refuses for the whole page; the
memory ledger took it, and hid the fault. Here a memory ledger refuses them as PostgreSQL does (the same run on the
real ledger: tests/integration/worker/test_unstorable_ids.py)."""

from __future__ import annotations

from collections.abc import Sequence

from store.errors import StoreError
from store.state.ledger import LedgerEntry, MemoryLedger, RunStatus
from store.vectors.records import DEFAULT_MAX_ID_CHARS, has_unstorable
from tests.unit.worker.runs.test_fanout import StampedSource, make_rig
from worker.sources.base import SourceRecord

BAD_IDS = ["nul\x00id", "sur\ud800", "x" * (DEFAULT_MAX_ID_CHARS + 1)]
GOOD_IDS = [f"{i:03d}" for i in range(5)]


class StrictLedger(MemoryLedger):
    """A memory ledger that refuses ids as PostgreSQL's statements do, and keeps every id it was asked about."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str] = []

    def entries(self, collection: str, record_ids: Sequence[str]) -> dict[str, LedgerEntry]:
        self.asked.extend(record_ids)
        if any(has_unstorable(i) for i in record_ids):
            raise StoreError("state database refused a statement: PostgreSQL text fields cannot contain NUL")
        return super().entries(collection, record_ids)


def test_the_fan_out_sends_refused_ids_unjudged_and_their_batch_fails_each_alone() -> None:
    records = {i: SourceRecord(i, f"note {i} about renewals", stamp="t0") for i in [*GOOD_IDS, *BAD_IDS]}
    rig = make_rig(StampedSource(records))
    strict = rig.ledger = rig.jobs.pipeline.ledger = StrictLedger()
    first = rig.reindex()  # a first load: the ledger holds none of the page
    assert (first.status, first.done, first.failed) == (RunStatus.DONE, len(GOOD_IDS), len(BAD_IDS)), first
    assert sorted(i for ids in rig.sent for i in ids) == sorted(records)  # each refused id sent, to fail alone
    records[GOOD_IDS[0]] = SourceRecord(GOOD_IDS[0], "a note changed since", stamp="t1")
    second = rig.reindex()  # the ledger holds the good ids now: each page is judged against it
    assert [sorted(ids) for ids in rig.sent] == [sorted([GOOD_IDS[0], *BAD_IDS])]
    assert (second.status, second.done, second.skipped, second.failed) == (RunStatus.DONE, 1, 4, 3), second
    assert not set(BAD_IDS) & set(strict.asked)
