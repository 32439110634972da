"""A reindex's fan-out: only the ids the index does not follow, in full batches.

The source is paged with its ``updated_at`` stamps (``Source.page_stamps``),
as a reconcile sweep pages it, and each page is judged against the ledger:

- a page the ledger holds nothing of (a first load) is new as a whole and is
  not read, so a first load fans out the source's own id pages, read once;
- otherwise the ids whose stamp moved, or that keep no stamp, are read and
  hashed (``Indexer.stale_ids``), and only the new and changed ones are kept.
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

A full reindex then sends the records the ledger holds and the source no longer has (``send_gone``) as
batches of the same run, which re-check each against the source and delete it: a TRUNCATE leaves thousands,
and deleting them inside the fan-out made it outlast its time limit, so that every retry began again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from store.errors import ConfigError
from store.state.ledger import Ledger, RunProgress
from worker.pipeline import Indexer

__all__ = ["FanOut", "changed_ids", "count_run", "fan_out", "send_gone"]
#: Sends one batch: its ids and its number in the run (0, 1, ...).
Send = Callable[[list[str], int], None]


@dataclass(slots=True)
class FanOut:
    """What a fan-out found and sent."""

    #: Ids the source has.
    total: int = 0
    #: index_batch tasks sent.
    batches: int = 0
    #: Ids found unchanged, never sent.
    unchanged: int = 0
    #: Ids the ledger holds and the source no longer has, sent to be deleted (a full reindex's).
    gone: int = 0
    #: Every id the source has (only when asked for: a full reindex drops the ledger's others).
    seen: set[str] = field(default_factory=set)


def changed_ids(indexer: Indexer, stamped: Sequence[tuple[str, str]], *, new: set[str] | None = None) -> list[str]:
    """The ids of one page of (id, stamp) pairs a reindex must send, in page order (see the module docstring).
    ``new``: where the ids of a page the ledger holds nothing of are added."""
    ids = [record_id for record_id, _ in stamped]
    known = indexer.ledger.entries(indexer.name, ids)
    if not known:
        if new is not None:
            new.update(ids)
        return ids
    probe = next((i for i, stamp in stamped if i in known and indexer.stamp_holds(known[i], stamp)), None)
    if probe is not None and indexer.stale_ids([(probe, "")], known=known):  # read and hashed
        return ids
    return indexer.stale_ids(stamped, known=known)


def fan_out(
    indexer: Indexer,
    *,
    batch_size: int,
    send: Send,
    keep_ids: bool = False,
    changed_only: bool = True,
    fresh: Send | None = None,
) -> FanOut:
    """Page through ``indexer``'s source and ``send`` what changed in batches of ``batch_size`` ids.

    Without ``changed_only`` every id page is sent as it is, numbered by its place in the source: a
    second attempt of a run sends that, so its batches repeat the first attempt's and none counts twice.
    ``fresh``: sends instead a batch whose ids the ledger held none of (a first load's), which need not read
    the ledger again (``Indexer.index``'s ``fresh``).
    """
    found = FanOut()
    pending: list[str] = []
    new: set[str] = set()
    after: str | None = None

    def out(ids: list[str]) -> None:
        (fresh if fresh is not None and new.issuperset(ids) else send)(ids, found.batches)
        found.batches += 1
        new.difference_update(ids)

    while stamped := indexer.source.page_stamps(after=after, limit=batch_size):
        changed = changed_ids(indexer, stamped, new=new) if changed_only else [i for i, _ in stamped]
        found.total += len(stamped)
        found.unchanged += len(stamped) - len(changed)
        if keep_ids:
            found.seen.update(record_id for record_id, _ in stamped)
        pending.extend(changed)
        while len(pending) >= batch_size:
            out(pending[:batch_size])
            pending = pending[batch_size:]
        after = stamped[-1][0]
    if pending:
        out(pending)
    return found


def count_run(ledger: Ledger, run_id: str, found: FanOut, *, pooled: bool = False) -> RunProgress:
    """Fix a reindex run's total once its batches are sent: every record of the source, and those gone from it.

    The unchanged records, never sent, are counted here as one more batch of
    skipped records, so the run reads as it always did (N records, M unchanged)
    and a run where nothing changed, with no batch sent, ends ``done`` at once.
    ``pooled``: the batches sent leave their leftovers in the run's pool (``worker.pooling``), so the run has
    one batch more, the pool batch, which is sent once the others are counted.
    """
    batches = found.batches
    if found.unchanged:
        ledger.finish_batch(run_id, batches, done=0, skipped=found.unchanged, failed=0)
        batches += 1
    if pooled and found.batches:
        batches += 1
    return ledger.set_run_total(run_id, total=found.total + found.gone, batches=batches)


def send_gone(
    collection: str, indexer: Indexer, found: FanOut, *, batch_size: int, send: Send, allow_empty: bool
) -> None:
    """A full reindex's last step: send the ids the ledger holds that the fan-out has not seen, in batches
    numbered after its own, to be re-checked against the source and deleted. Refused when the source returned
    nothing at all and the collection holds chunks, unless ``allow_empty``."""
    if not found.seen and not allow_empty and indexer.collection.count() > 0:
        raise ConfigError(
            f"the source of {collection!r} returned no records; a full reindex would empty the collection. "
            "Check the source, or pass allow_empty (vectorsync reindex --full --allow-empty)"
        )
    gone = sorted(indexer.ledger.record_ids(indexer.name) - found.seen)
    for start in range(0, len(gone), batch_size):
        send(gone[start : start + batch_size], found.batches)
        found.batches += 1
    found.gone += len(gone)
