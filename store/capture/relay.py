"""The relay: outbox rows to the broker, deleted only once the broker has taken the tasks (at least once; the
tasks are idempotent).

Each claim takes up to ``capture.claim_rows`` rows with ``FOR UPDATE SKIP LOCKED``
(several relays share the work), coalesces repeated ids, sends, then deletes
the rows in the same transaction. A few ids of a collection go to the live
queue one by one; a flood (``worker.batch_size`` or more) goes as full
``index_batch`` tasks to the bulk queue; a ``TRUNCATE`` becomes a full reindex
that may empty the collection, since that is the source's truth. A
relay polls every ``capture.poll_seconds`` (0.5); with ``source.capture_notify`` a
payload-free NOTIFY wakes it at once, and a missed notification costs one poll.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from store.capture.outbox import Change, Outbox
from store.capture.sql import CHANNEL
from store.capture.target import sql_sources
from store.errors import ConfigError
from store.settings import Settings

__all__ = ["Plan", "Relay", "Sends", "plan", "relays_from_settings"]

log = logging.getLogger(__name__)
#: Seconds between looks for an outbox in a source database that has none yet (a NOTIFY wakes it sooner).
MISSING_OUTBOX_SECONDS = 10.0
#: The longest wait between attempts after the source database or the broker failed.
MAX_BACKOFF_SECONDS = 30.0


class Sends(Protocol):
    """What the relay sends through: ``store.broker.producer.Producer`` is one."""

    def index_records(
        self,
        collection: str,
        record_ids: Sequence[str],
        *,
        coalesce: bool = True,
        changed_at: Mapping[str, float] | None = None,
    ) -> int: ...

    def record_failure(self, collection: str, record_id: str, error: str) -> None: ...

    def index_batch(self, collection: str, record_ids: Sequence[str], *, changed_at: float | None = None) -> None: ...

    def reindex_all(self, collection: str, *, full: bool = False, allow_empty: bool = False) -> str: ...


@dataclass
class Plan:
    """What one claim's changes become, per collection: a full reindex (after a TRUNCATE), its ids, and when
    each id first changed (the oldest of its rows: freshness is measured from it)."""

    truncated: set[str] = field(default_factory=set)
    ids: dict[str, list[str]] = field(default_factory=dict)
    changed_at: dict[str, dict[str, float]] = field(default_factory=dict)


def plan(changes: Sequence[Change]) -> Plan:
    """Coalesce a claim: each id once, in the order first changed; a collection whose table was truncated is
    reindexed whole, and its ids are sent as well: the reindex trusts ``updated_at`` stamps, and rows put
    back after the TRUNCATE (a reload) may keep their stamps with new contents."""
    result = Plan()
    seen: dict[str, dict[str, None]] = {}
    for change in changes:
        if change.truncated:
            result.truncated.add(change.collection)
        elif change.record_id is not None:
            seen.setdefault(change.collection, {})[change.record_id] = None
            if change.at is not None:
                times = result.changed_at.setdefault(change.collection, {})
                times[change.record_id] = min(times.get(change.record_id, change.at), change.at)
    result.ids = {name: list(ids) for name, ids in seen.items()}
    return result


class Relay:
    """Moves the outbox rows of the collections ``names`` out of one source database."""

    def __init__(
        self,
        outbox: Outbox,
        names: Sequence[str],
        sends: Sends,
        *,
        claim_rows: int = 5000,
        batch_size: int = 100,
        poll_seconds: float = 0.5,
    ) -> None:
        self.outbox, self.names, self.sends = outbox, sorted(names), sends
        self.claim_rows, self.batch_size, self.poll_seconds = claim_rows, batch_size, poll_seconds
        self._has_outbox = False

    def drain(self) -> int:
        """Move every row there is now; returns how many. Raises StoreError, StoreUnavailable, broker errors
        (the rows of a failed claim stay in the outbox)."""
        if not self._has_outbox:
            self._has_outbox = self.outbox.exists()
            if not self._has_outbox:
                return 0
        moved = 0
        while True:
            with self.outbox.claim(self.names, self.claim_rows) as changes:
                self._send(plan(changes))
            moved += len(changes)
            if len(changes) < self.claim_rows:
                return moved

    def _send(self, work: Plan) -> None:
        for name in sorted(work.truncated):
            run_id = self.sends.reindex_all(name, full=True, allow_empty=True)
            log.info("%s was truncated: reindex %s brings the collection in line", name, run_id)
        for name, ids in work.ids.items():
            times = work.changed_at.get(name, {})
            try:
                self._send_ids(name, ids, times)
            except ConfigError:  # an id refused before sending: the others go, it fails alone
                for record_id in ids:
                    try:
                        self._send_ids(name, [record_id], times)
                    except ConfigError as exc:
                        log.error("captured change of %s refused, recorded as failed: %s", name, exc)
                        self.sends.record_failure(name, record_id, str(exc))

    def _send_ids(self, name: str, ids: list[str], changed_at: Mapping[str, float]) -> None:
        """A few ids one by one to the live queue (never coalesced: the rows are deleted once sent), a flood as
        full batches to the bulk queue; each stamped with when its change was written (a batch: its oldest)."""
        if len(ids) < self.batch_size:
            self.sends.index_records(name, ids, coalesce=False, changed_at=changed_at)
            return
        for start in range(0, len(ids), self.batch_size):
            batch = ids[start : start + self.batch_size]
            known = [changed_at[i] for i in batch if i in changed_at]
            self.sends.index_batch(name, batch, changed_at=min(known) if known else None)

    def run(self, stop: threading.Event) -> None:
        """Drain, then wait for a NOTIFY or the next poll, until ``stop`` is set. Failures are logged and
        retried with backoff: the rows wait in the outbox meanwhile."""
        listener: Any = None
        backoff = self.poll_seconds
        while not stop.is_set():
            try:
                if listener is None and (self._has_outbox or self.outbox.exists()):
                    listener = self._listen()  # before draining, so a change committed meanwhile still wakes it
                moved = self.drain()
                if moved:
                    log.debug("relayed %d changes from %s", moved, self.outbox.safe_url)
                backoff = self.poll_seconds
                self._wait(listener, self.poll_seconds if self._has_outbox else MISSING_OUTBOX_SECONDS, stop)
            except Exception as exc:  # the source database or the broker: the rows stay, try again later
                log.warning("capture relay for %s: %s; trying again in %.0f s", self.outbox.safe_url, exc, backoff)
                listener = self._close(listener)
                self._has_outbox = False
                stop.wait(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)
        self._close(listener)

    def _listen(self) -> Any:
        """A connection of its own that LISTENs for the wake-up (autocommit: a notification arrives between
        transactions)."""
        raw = self.outbox.engine.raw_connection()
        conn = raw.driver_connection
        assert conn is not None
        conn.autocommit = True
        conn.execute(f"LISTEN {CHANNEL}")
        return raw

    @staticmethod
    def _close(listener: Any) -> None:
        if listener is not None:
            with contextlib.suppress(Exception):  # already broken: nothing to give back
                listener.invalidate()

    @staticmethod
    def _wait(listener: Any, timeout: float, stop: threading.Event) -> None:
        """Until a notification, ``timeout`` or ``stop``; checks ``stop`` at least twice a second."""
        if listener is None:  # no outbox yet: nothing to listen for
            stop.wait(timeout)
            return
        deadline = time.monotonic() + timeout
        while not stop.is_set() and (left := deadline - time.monotonic()) > 0:
            for _ in listener.driver_connection.notifies(timeout=min(left, 0.5), stop_after=1):
                return

    def close(self) -> None:
        self.outbox.close()


def relays_from_settings(settings: Settings, sends: Sends) -> list[Relay]:
    """One relay per source database of the declared SQL collections on PostgreSQL, capture on or off: rows a
    disabled capture left behind drain too. Rows of collections no longer declared stay (``status`` shows them)."""
    by_url: dict[str, list[str]] = {}
    for name, source in sql_sources(settings).items():
        assert source.url is not None
        by_url.setdefault(source.url, []).append(name)
    return [
        Relay(
            Outbox(url, network=settings.network),
            names,
            sends,
            claim_rows=settings.capture.claim_rows,
            batch_size=settings.worker.batch_size,
            poll_seconds=settings.capture.poll_seconds,
        )
        for url, names in by_url.items()
    ]
