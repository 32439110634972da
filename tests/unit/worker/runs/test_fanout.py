"""A reindex's fan-out in one process: memory store, memory ledger, fake embeddings counted per provider call.

A first load sends the source's id pages unread, as it always did; a reindex
of an unchanged source sends nothing and ends done; after an edit only the
changed records are sent, together, so they make ceil(changed chunks / batch)
provider calls. Batches are run here as the worker runs them (index, decide,
finish_batch), so the run's accounting is checked too.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from store.embeddings import Embeddings
from store.settings import Settings
from store.state.ledger import MemoryLedger, RunProgress, RunStatus
from store.vectors.filters import AnyOf
from store.vectors.records import VectorRecord, text_digest
from tests.backends import unique_name
from worker.pipeline.chunker import Chunker
from worker.pipeline.core import Pipeline, Recipe
from worker.runs.fanout import FanOut, Step, count_run, fan_out, gone_ids, send_gone
from worker.runtime.context import Jobs
from worker.sources.base import SourceRecord
from worker.sources.python import PythonSource
from worker.tasks.policy import RetryPolicy, decide

RECORDS = 2_000
BATCH = 100
EMBED_BATCH = 16
WORDS = ["onboarding", "rollout", "invoice", "renewal", "pricing", "discount", "contract", "meeting", "churn"]
#: The Python source of the stampless tests: ``tests.unit.worker.runs.test_fanout:load_records``.
LOADED: dict[str, dict[str, Any]] = {}


def load_records(ids: list[str] | None) -> Iterable[dict[str, Any]]:
    return [r for key, r in LOADED.items() if ids is None or key in ids]


@dataclass
class StampedSource:
    """Records in a dict, each with an ``updated_at`` stamp; remembers which ids were read in full."""

    records: dict[str, SourceRecord]
    read: list[str] = field(default_factory=list)

    def fetch(self, ids: Sequence[str]) -> dict[str, SourceRecord]:
        self.read.extend(ids)
        return {i: self.records[i] for i in ids if i in self.records}

    def page_ids(self, *, after: str | None, limit: int) -> list[str]:
        return [i for i, _ in self.page_stamps(after=after, limit=limit)]

    def page_stamps(self, *, after: str | None, limit: int) -> list[tuple[str, str]]:
        ids = sorted(i for i in self.records if after is None or i > after)[:limit]
        return [(i, self.records[i].stamp) for i in ids]

    def close(self) -> None:
        """Nothing to release."""


class Chunks:
    """A collection keeping chunks by record id (the memory store scans every chunk per filter: too slow here)."""

    def __init__(self) -> None:
        self.by_record: dict[str, list[VectorRecord]] = {}
        self.indexed: dict[str, str] = {}  # no declared indexed fields

    def replace_where(self, filter: AnyOf, records: list[VectorRecord]) -> None:
        self.delete_where(filter)
        for record in records:
            self.by_record.setdefault(record.metadata["record_id"], []).append(record)

    def delete_where(self, filter: AnyOf) -> None:
        for record_id in filter.values:
            self.by_record.pop(str(record_id), None)

    def replace_records(self, record_ids: list[str], records: list[VectorRecord]) -> None:
        self.replace_where(AnyOf("record_id", tuple(record_ids)), records)

    def vectors_by_hash(self, hashes: list[str], *, model: str) -> dict[str, list[float]]:
        held = (r for chunks in self.by_record.values() for r in chunks if r.model == model)
        return {digest: list(r.embedding) for r in held if (digest := text_digest(r.text)) in hashes}

    def is_empty(self) -> bool:
        return not self.by_record


@dataclass
class Rig:
    """A generation's jobs over a source, and what its reindexes sent."""

    jobs: Jobs
    ledger: MemoryLedger
    chunks: Chunks
    sent: list[list[str]] = field(default_factory=list)
    #: Ids the last fan-out read in full (a StampedSource's reads; its batches' reads come after).
    fan_out_read: list[str] = field(default_factory=list)
    #: The record ids the store held once the last fan-out had sent its batches, before they ran.
    stored_after_fan_out: set[str] = field(default_factory=set)
    #: Steps the last fan-out took.
    steps: int = 0
    #: What the last reindex sent: each batch's ids and number.
    numbered: list[tuple[list[str], int]] = field(default_factory=list)

    @property
    def calls(self) -> int:
        """Provider calls so far (the chain's own counter, as the metrics read it)."""
        return sum(self.jobs.pipeline.embeddings.stats.calls.values())

    def reindex(self, *, full: bool = False, pages: int | None = None) -> RunProgress:
        """What the reindex_all task does, with its batches run at once as index_batch runs them; ``pages``: in
        steps of so many pages, each going on from the last one's cursor (sent as JSON, as the task sends it)."""
        run_id = self.ledger.create_run(self.jobs.pipeline.name, full=full)
        batches: list[tuple[list[str], int]] = []
        read: list[str] = getattr(self.jobs.pipeline.source, "read", [])
        start = len(read)
        self.steps = 0
        found = FanOut()
        while not found.finished:
            step = None if pages is None else Step(FanOut.resumed(json.loads(json.dumps(found.cursor()))), pages)
            found = fan_out(
                self.jobs.sweeper, batch_size=BATCH, send=lambda ids, n: batches.append((ids, n)), step=step
            )
            self.steps += 1
        if full:
            send = lambda ids, n: batches.append((ids, n))  # noqa: E731
            send_gone(self.jobs.pipeline.name, self.jobs.sweeper, found, batch_size=BATCH, send=send, allow_empty=False)
        self.numbered, self.sent, self.fan_out_read = batches, [ids for ids, _ in batches], read[start:]
        self.stored_after_fan_out = set(self.chunks.by_record)
        progress = count_run(self.ledger, run_id, found)
        for ids, number in batches:
            counts = decide(self.jobs.indexer.index(ids), retries=0, policy=RetryPolicy(0, 0.0)).counts
            progress = self.ledger.finish_batch(run_id, number, **counts)
        return progress


def text(rng: random.Random) -> str:
    """About three chunks of the test chunker, seldom one the same as another's."""
    return " ".join(f"{rng.choice(WORDS)} {rng.randrange(1000)}" for _ in range(rng.randint(4, 8)))


def make_rig(source: Any) -> Rig:
    settings = Settings.model_validate(
        {
            "vectors": {"store": "memory", "dimensions": 16},
            "embeddings": {"cache_ttl_days": 0, "batch_size": EMBED_BATCH},
        }
    )
    name, ledger, chunks = unique_name(), MemoryLedger(), Chunks()
    pipeline = Pipeline(
        name=name,
        collection=chunks,  # type: ignore[arg-type]
        source=source,
        recipe=Recipe(Chunker(max_tokens=8, overlap=2), Embeddings.from_settings(settings)),
        ledger=ledger,
    )
    return Rig(Jobs.over(pipeline), ledger, chunks)


def stamped_rig(rng: random.Random) -> tuple[Rig, StampedSource]:
    source = StampedSource(
        {f"{i:05d}": SourceRecord(f"{i:05d}", text(rng), {"n": i}, stamp="t0") for i in range(RECORDS)}
    )
    return make_rig(source), source


def ideal(rig: Rig, texts: Iterable[str]) -> int:
    """ceil(distinct chunk texts of these records / the embedding batch size): the fewest provider calls."""
    chunks = {chunk.text for t in texts for chunk in rig.jobs.pipeline.chunker.split(t)}
    return math.ceil(len(chunks) / EMBED_BATCH)


def test_a_first_load_sends_the_source_id_pages_unread_as_before() -> None:
    rig, source = stamped_rig(random.Random(1))
    progress = rig.reindex()
    pages, after = [], None
    while page := source.page_ids(after=after, limit=BATCH):
        pages.append(page)
        after = page[-1]
    assert rig.sent == pages and len(pages) == RECORDS // BATCH  # one batch per id page, in order
    assert rig.fan_out_read == []  # the source is read once: by the batches
    per_batch = sum(ideal(rig, (source.records[i].text for i in ids)) for ids in pages)
    assert rig.calls == per_batch  # every batch's chunks share its provider calls
    assert (progress.status, progress.total, progress.done, progress.skipped) == (RunStatus.DONE, RECORDS, RECORDS, 0)


def test_an_unchanged_reindex_sends_nothing_makes_no_call_and_ends_done() -> None:
    rig, _ = stamped_rig(random.Random(2))
    rig.reindex()
    calls = rig.calls
    progress = rig.reindex()
    assert rig.sent == [] and rig.calls == calls
    assert len(rig.fan_out_read) == RECORDS // BATCH  # one record per page, read to check the stamps still hold
    assert (progress.status, progress.total, progress.done, progress.skipped) == (RunStatus.DONE, RECORDS, 0, RECORDS)


def test_a_one_percent_edit_makes_ceil_changed_chunks_over_batch_size_calls() -> None:
    rng = random.Random(3)
    rig, source = stamped_rig(rng)
    rig.reindex()
    edited = sorted(rng.sample(sorted(source.records), RECORDS // 100))
    for i in edited:
        source.records[i] = SourceRecord(i, text(rng), {"n": -1}, stamp="t1")
    calls = rig.calls
    progress = rig.reindex()
    assert rig.sent == [edited]  # one full batch of changed records, not one batch each
    probes = [i for i in rig.fan_out_read if i not in edited]
    assert set(edited) <= set(rig.fan_out_read) and len(probes) == RECORDS // BATCH  # moved ones; a probe a page
    assert rig.calls - calls == ideal(rig, (source.records[i].text for i in edited))
    assert (progress.status, progress.total, progress.done, progress.skipped) == (
        RunStatus.DONE,
        RECORDS,
        len(edited),
        RECORDS - len(edited),
    )


def test_without_stamps_pages_are_hashed_and_only_changed_records_are_sent() -> None:
    rng = random.Random(4)
    LOADED.clear()
    LOADED.update({f"{i:05d}": {"id": f"{i:05d}", "text": text(rng)} for i in range(RECORDS)})
    rig = make_rig(PythonSource(loader=f"{__name__}:load_records"))
    rig.reindex()
    assert rig.reindex().skipped == RECORDS and rig.sent == []
    edited = sorted(rng.sample(sorted(LOADED), RECORDS // 100))
    for i in edited:
        LOADED[i]["text"] = text(rng) + " edited"
    calls = rig.calls
    progress = rig.reindex()
    assert rig.sent == [edited]
    assert rig.calls - calls == ideal(rig, (LOADED[i]["text"] for i in edited))
    assert (progress.status, progress.done, progress.skipped) == (RunStatus.DONE, len(edited), RECORDS - len(edited))


def test_changed_and_new_records_fill_batches_across_pages() -> None:
    rng = random.Random(5)
    rig, source = stamped_rig(rng)
    rig.reindex()
    edited = sorted(rng.sample(sorted(source.records), 230))
    for i in edited:
        source.records[i] = SourceRecord(i, text(rng), stamp="t1")
    new = [f"{i:05d}" for i in range(RECORDS, RECORDS + 20)]
    source.records.update({i: SourceRecord(i, text(rng), stamp="t0") for i in new})
    progress = rig.reindex()
    assert [len(ids) for ids in rig.sent] == [BATCH, BATCH, 50]
    assert [i for ids in rig.sent for i in ids] == [*edited, *new]
    assert not set(new) & set(rig.fan_out_read)  # new to the ledger: sent unread
    assert (progress.status, progress.total, progress.done) == (RunStatus.DONE, RECORDS + 20, 250)


def test_a_chunker_change_under_unchanged_stamps_reindexes_everything() -> None:
    rig, source = stamped_rig(random.Random(6))
    rig.reindex()
    rig.jobs.pipeline.chunker = Chunker(max_tokens=12, overlap=2)  # no stamp shows it; the content hash does
    progress = rig.reindex()
    assert [i for ids in rig.sent for i in ids] == sorted(source.records)
    assert len(rig.fan_out_read) == RECORDS // BATCH  # only the probes: each page goes whole, unread
    assert (progress.status, progress.done, progress.skipped) == (RunStatus.DONE, RECORDS, 0)


def test_a_full_reindex_still_sees_every_id() -> None:
    rig, source = stamped_rig(random.Random(7))
    rig.reindex()
    deleted = ["00007", "01500"]
    for i in deleted:
        del source.records[i]
    found = fan_out(rig.jobs.sweeper, batch_size=BATCH, send=lambda ids, n: None)
    assert found.total == len(source.records) and found.batches == 0
    assert gone_ids(rig.jobs.sweeper) == deleted  # what reindex_all then drops


def test_a_full_reindex_sends_the_records_gone_from_the_source_as_batches_of_its_run() -> None:
    """A TRUNCATE left thousands of gone records; deleting them inside the fan-out made it outlast its time limit,
    and each retry began again (chaos seed 11). They go out as the run's own batches, after the source's."""
    rig, source = stamped_rig(random.Random(9))
    rig.reindex()
    gone = sorted(source.records)[::2]
    for i in gone:
        del source.records[i]
    progress = rig.reindex(full=True)
    assert rig.stored_after_fan_out == set(source.records) | set(gone)  # the fan-out itself deleted nothing
    assert [i for ids in rig.sent for i in ids] == gone  # the kept records are unchanged: only the gone are sent
    assert (progress.status, progress.total, progress.done) == (RunStatus.DONE, RECORDS, len(gone))
    assert set(rig.chunks.by_record) == set(source.records)


def test_a_second_attempt_of_a_run_sends_every_id_page_numbered_as_in_a_first_load() -> None:
    rig, source = stamped_rig(random.Random(8))
    rig.reindex()
    batches: list[tuple[list[str], int]] = []
    found = fan_out(
        rig.jobs.sweeper, batch_size=BATCH, changed_only=False, send=lambda ids, n: batches.append((ids, n))
    )
    assert [n for _, n in batches] == list(range(RECORDS // BATCH)) and found.unchanged == 0
    assert [i for ids, _ in batches for i in ids] == sorted(source.records)


@pytest.mark.parametrize("pages", [1, 3])
def test_a_fan_out_in_steps_sends_what_one_fan_out_sends(pages: int) -> None:
    """Each step goes on from the cursor the last one left, sent as JSON as the task sends it: a first load, then
    a full reindex after edits, new records and deletions, send the same batches with the same numbers, and end
    the same runs, whether the source is fanned out at once or a few pages at a time."""
    seen = []
    for step in (None, pages):
        rng = random.Random(10)
        rig, source = stamped_rig(rng)
        first = rig.reindex(pages=step)
        first_batches, first_steps = rig.numbered, rig.steps
        for i in rng.sample(sorted(source.records), 230):
            source.records[i] = SourceRecord(i, text(rng), stamp="t1")
        source.records.update(
            {f"{i:05d}": SourceRecord(f"{i:05d}", text(rng), stamp="t0") for i in range(RECORDS, 2050)}
        )
        for i in sorted(source.records)[3::41]:
            del source.records[i]
        full = rig.reindex(full=True, pages=step)
        runs = [(p.status, p.total, p.done, p.skipped, p.failed) for p in (first, full)]
        seen.append((first_batches, rig.numbered, runs, set(rig.chunks.by_record) == set(source.records)))
        if step is not None:
            assert first_steps == RECORDS // BATCH // pages + 1  # the last step finds the source's end
    assert seen[0] == seen[1]
    assert seen[1][2][1][0] == RunStatus.DONE and seen[1][3]
