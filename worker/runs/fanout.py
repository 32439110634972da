"""A reindex's fan-out: only the ids the index does not follow, in full batches.

The source is paged with its ``updated_at`` stamps (``Source.page_stamps``),
as a reconcile sweep pages it, and each page is judged against the ledger:

- a page the ledger holds nothing of (a first load) is new as a whole and is
  not read, so a first load fans out the source's own id pages, read once;
- otherwise the ids whose stamp moved, or that keep no stamp, are read and
  hashed (``Sweeper.stale_ids``), and only the new and changed ones are kept.
  Stamps are trusted while one record of the page whose stamp held still
  hashes as the ledger says; when it does not (the chunker, the model or its
  dimensions changed, which no stamp shows), the page goes whole, unread, and
  its batch judges each record by content, as every reindex once did.

Kept ids accumulate and go out as an ``index_batch`` whenever ``batch_size``
of them are in (the rest at the end), so each batch's records share full
provider calls instead of one changed record per batch paying a call alone.
The batch re-checks every hash, so a record judged here that changes again
meanwhile is still indexed as it is. The ids the fan-out found unchanged are
counted in the run as one batch of skipped records (``count_run``).

A fan-out goes in steps of at most ``worker.fanout_pages`` pages (``Step``). A step that has not
reached the source's end hands the rest to a step of its own, queued behind the
batches it sent (``FanOut.cursor``): a worker takes it once those are taken, so
the bulk queue holds about that many batches of a run, whatever the source's
size, and no step outlasts a task's time limit on a big source. Sending all
10,000 batches of a million records at once held 38 MiB in Redis.

A full reindex then sends the records the ledger holds and the source no longer has (``send_gone``) as
batches of the same run, which re-check each against the source and delete it: a TRUNCATE leaves thousands,
and deleting them inside the fan-out made it outlast its time limit, so that every retry began again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from store.errors import ConfigError
from store.state.ledger import Ledger, RunProgress
from store.vectors.records import check_record_id
from worker.pipeline.sweeper import Sweeper

__all__ = ["FanOut", "Step", "changed_ids", "count_run", "fan_out", "gone_ids", "refused_ids", "send_gone"]
#: Sends one batch: its ids and its number in the run (0, 1, ...).
Send = Callable[[list[str], int], None]
#: Ids per page when a full reindex looks for the records gone from the source (ids only, nothing else read).
GONE_PAGE = 1000


@dataclass(slots=True)
class FanOut:
    """What a fan-out found and sent so far, and where it goes on (its ``cursor``)."""

    #: Ids the source has.
    total: int = 0
    #: index_batch tasks sent.
    batches: int = 0
    #: Ids found unchanged, never sent.
    unchanged: int = 0
    #: Ids the ledger holds and the source no longer has, sent to be deleted (a full reindex's).
    gone: int = 0
    #: The last id paged: the next step reads the source after it.
    after: str | None = None
    #: Ids kept for the next batch (fewer than a batch), and those of them the ledger held nothing of.
    pending: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)
    #: True once the source is paged to its end and every id kept is sent.
    finished: bool = False

    def cursor(self) -> dict[str, Any]:
        """The JSON a step sends on to the next (``resumed`` reads it back)."""
        return asdict(self)

    @classmethod
    def resumed(cls, cursor: Mapping[str, Any]) -> FanOut:
        """A fan-out going on where ``cursor`` says; ConfigError when the message does not hold one."""
        try:
            found = cls(**cursor)
        except TypeError as exc:
            raise ConfigError(f"a reindex step's cursor is not one ({exc}): send the reindex again") from None
        counts = (found.total, found.batches, found.unchanged, found.gone)
        ids = [*found.pending, *found.new, *([] if found.after is None else [found.after])]
        if not all(isinstance(n, int) and n >= 0 for n in counts) or not all(isinstance(i, str) for i in ids):
            raise ConfigError(f"a reindex step's cursor holds {cursor!r}: send the reindex again")
        return found


@dataclass(frozen=True, slots=True)
class Step:
    """One step of a fan-out: from where ``start`` stopped, at most ``pages`` pages of the source."""

    start: FanOut
    pages: int


def refused_ids(sweeper: Sweeper, ids: Sequence[str]) -> set[str]:
    """The ids ``check_record_id`` refuses (a NUL, a lone surrogate, empty, over ``limits.max_id_chars``): no
    ledger query may see them (PostgreSQL refuses a NUL in a parameter, and a lone surrogate cannot be encoded),
    and no ledger holds them, so they are new, and their batch fails each alone with a failures row."""
    refused = set()
    for record_id in ids:
        try:
            check_record_id(record_id, max_chars=sweeper.pipeline.limits.max_id_chars)
        except ConfigError:
            refused.add(record_id)
    return refused


def changed_ids(sweeper: Sweeper, stamped: Sequence[tuple[str, str]], *, new: set[str] | None = None) -> list[str]:
    """The ids of one page of (id, stamp) pairs a reindex must send, in page order (see the module docstring).
    ``new``: where the ids of a page the ledger holds nothing of are added. An id no ledger can hold
    (``refused_ids``) is sent, unjudged, as new: its batch fails it alone, saying why."""
    refused = refused_ids(sweeper, [record_id for record_id, _ in stamped])
    if new is not None:
        new.update(refused)
    kept = set(_changed(sweeper, [pair for pair in stamped if pair[0] not in refused], new=new)) | refused
    return [record_id for record_id, _ in stamped if record_id in kept]


def _changed(sweeper: Sweeper, stamped: Sequence[tuple[str, str]], *, new: set[str] | None) -> list[str]:
    """``changed_ids`` of a page whose ids a ledger can hold."""
    ids = [record_id for record_id, _ in stamped]
    if not ids:
        return []
    known = sweeper.pipeline.ledger.entries(sweeper.pipeline.name, ids)
    if not known:
        if new is not None:
            new.update(ids)
        return ids
    probe = next((i for i, stamp in stamped if i in known and sweeper.stamp_holds(known[i], stamp)), None)
    if probe is not None and sweeper.stale_ids([(probe, "")], known=known):  # read and hashed
        return ids
    return sweeper.stale_ids(stamped, known=known)


def fan_out(
    sweeper: Sweeper,
    *,
    batch_size: int,
    send: Send,
    changed_only: bool = True,
    fresh: Send | None = None,
    step: Step | None = None,
) -> FanOut:
    """Page through ``sweeper``'s source and ``send`` what changed in batches of ``batch_size`` ids.

    Without ``changed_only`` every id page is sent as it is, numbered by its place in the source: a
    second attempt of a run sends that, so its batches repeat the first attempt's and none counts twice.
    ``fresh``: sends instead a batch whose ids the ledger held none of (a first load's), which need not read
    the ledger again (``Indexer.index``'s ``fresh``). ``step``: go on from where an earlier step stopped, for
    at most so many pages; without it, the whole source at once.
    """
    found, window = (step.start, step.pages) if step is not None else (FanOut(), None)
    pending, new = list(found.pending), set(found.new)
    pages = 0

    def out(ids: list[str]) -> None:
        (fresh if fresh is not None and new.issuperset(ids) else send)(ids, found.batches)
        found.batches += 1
        new.difference_update(ids)

    while window is None or pages < window:
        stamped = sweeper.pipeline.source.page_stamps(after=found.after, limit=batch_size)
        if not stamped:
            found.finished = True
            break
        pages += 1
        changed = changed_ids(sweeper, stamped, new=new) if changed_only else [i for i, _ in stamped]
        found.total += len(stamped)
        found.unchanged += len(stamped) - len(changed)
        pending.extend(changed)
        while len(pending) >= batch_size:
            out(pending[:batch_size])
            pending = pending[batch_size:]
        found.after = stamped[-1][0]
    if found.finished and pending:
        out(pending)
        pending = []
    found.pending, found.new = pending, [i for i in pending if i in new]
    return found


def count_run(ledger: Ledger, run_id: str, found: FanOut, *, pooled: bool = False) -> RunProgress:
    """Fix a reindex run's total once its batches are sent: every record of the source, and those gone from it.

    The unchanged records, never sent, are counted here as one more batch of
    skipped records, so the run reads as it always did (N records, M unchanged)
    and a run where nothing changed, with no batch sent, ends ``done`` at once.
    ``pooled``: the batches sent leave their leftovers in the run's pool (``worker.pipeline.leftovers``), so the run has
    one batch more, the pool batch, which is sent once the others are counted.
    """
    batches = found.batches
    if found.unchanged:
        ledger.finish_batch(run_id, batches, done=0, skipped=found.unchanged, failed=0)
        batches += 1
    if pooled and found.batches:
        batches += 1
    return ledger.set_run_total(run_id, total=found.total + found.gone, batches=batches)


def gone_ids(sweeper: Sweeper) -> list[str]:
    """The ids the ledger holds and the source no longer has: the ledger's, less each page of the source's ids.
    Only the ledger's ids are held, never the source's, and they are held by the one step that asks."""
    pipeline = sweeper.pipeline
    known = pipeline.ledger.record_ids(pipeline.name)
    after: str | None = None
    while known and (ids := pipeline.source.page_ids(after=after, limit=GONE_PAGE)):
        known.difference_update(ids)
        after = ids[-1]
    return sorted(known)


def send_gone(
    collection: str, sweeper: Sweeper, found: FanOut, *, batch_size: int, send: Send, allow_empty: bool
) -> None:
    """A full reindex's last step: send the ids the ledger holds that the source no longer has, in batches
    numbered after its own, to be re-checked against the source and deleted. Refused when the source returned
    nothing at all and the collection holds chunks, unless ``allow_empty``."""
    if not found.total and not allow_empty and not sweeper.pipeline.collection.is_empty():
        raise ConfigError(
            f"the source of {collection!r} returned no records; a full reindex would empty the collection. "
            "Check the source, or pass allow_empty (vectorsync reindex --full --allow-empty)"
        )
    gone = gone_ids(sweeper)
    for start in range(0, len(gone), batch_size):
        send(gone[start : start + batch_size], found.batches)
        found.batches += 1
    found.gone += len(gone)
