"""Writes all the while: raw SQL on the captured table (inserts, updates with and without ``updated_at``,
deletes, a TRUNCATE now and then), ``index_record`` from app code, and pushed documents with edits and deletes.

A write the outage refused is counted and, for a pushed document, sent again once everything is back (as an
app whose enqueue failed would): the source table, and the documents as last pushed, are what the index must
end up holding.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from store.broker.producer import Producer
from tests.crm import Psql, insert_notes, note
from tests.reliability.chaos.system import PUSHED, SQL, System

__all__ = ["Writers"]

#: Each kind of write and how often it comes relative to the others.
WRITES = {
    "insert": 6,
    "update": 5,
    "update_plain": 3,
    "delete": 2,
    "truncate": 0.05,
    "index_record": 2,
    "push": 4,
    "push_edit": 3,
    "push_delete": 1,
}


@dataclass
class Writers:
    """A thread writing ``per_second`` times a second, the kinds drawn from ``seed``."""

    system: System
    seed: int
    per_second: float = 8.0
    done: Counter[str] = field(default_factory=Counter)
    refused: Counter[str] = field(default_factory=Counter)
    #: Pushed documents as last pushed: id -> (text, metadata); None when deleted.
    documents: dict[str, tuple[str, dict[str, Any]] | None] = field(default_factory=dict)
    #: Pushed documents whose last push the broker refused: sent again at the end.
    unsent: set[str] = field(default_factory=set)
    #: When each document was last pushed (or deleted), seconds from ``start``: what a lost one is told by.
    pushed_at: dict[str, float] = field(default_factory=dict)
    started: float = 0.0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self.started = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="chaos-writers", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=120)

    def _run(self) -> None:
        rng = random.Random(self.seed * 7 + 1)
        sql, producer = Psql(self.system.database), Producer(self.system.settings)
        next_id, version = 1, 0
        kinds, weights = list(WRITES), list(WRITES.values())
        try:
            while not self._stop.wait(rng.expovariate(self.per_second)):
                kind = rng.choices(kinds, weights)[0]
                version += 1
                try:
                    next_id = self._write(kind, rng, sql, producer, next_id, version)
                    self.done[kind] += 1
                except Exception:  # the outage under test refused it: the source is what it is
                    self.refused[kind] += 1
                    if kind.startswith("push"):
                        self.unsent.add(self._last_doc)
                    sql = _reopened(sql, self.system.database)
        finally:
            sql.close()
            producer.close()

    _last_doc = ""

    def _write(self, kind: str, rng: random.Random, sql: Psql, producer: Producer, next_id: int, version: int) -> int:
        table = self.system.crm.name
        if kind == "insert":
            count = rng.randint(1, 30)
            insert_notes(sql, table, [note(i, rng=rng) for i in range(next_id, next_id + count)])
            return next_id + count
        some = rng.randrange(1, max(2, next_id))
        if kind == "update":  # moves updated_at
            row = note(some, version=version)
            sql.run(
                f'UPDATE "{table}" SET body = %s, kind = %s, updated_at = now() WHERE id = %s',
                (row["body"], row["kind"], some),
            )
        elif kind == "update_plain":  # leaves updated_at alone
            sql.run(
                f'UPDATE "{table}" SET title = %s WHERE id BETWEEN %s AND %s',
                (f"Note {some} v{version}", some, some + rng.randint(0, 5)),
            )
        elif kind == "delete":
            sql.run(f'DELETE FROM "{table}" WHERE id BETWEEN %s AND %s', (some, some + rng.randint(0, 10)))
        elif kind == "truncate":
            sql.run(f'TRUNCATE "{table}"')
        elif kind == "index_record":
            producer.index_record(SQL, some)
        else:
            self._push(kind, rng, producer, version)
        return next_id

    def _push(self, kind: str, rng: random.Random, producer: Producer, version: int) -> None:
        live = sorted(k for k, v in self.documents.items() if v is not None)
        doc = f"doc-{len(self.documents) + 1}" if kind == "push" or not live else rng.choice(live)
        self._last_doc = doc
        self.pushed_at[doc] = time.monotonic() - self.started
        if kind == "push_delete" and live:
            self.documents[doc] = None
            producer.delete_document(PUSHED, doc)
        else:
            row = note(version, version=version, rng=rng)
            self.documents[doc] = (str(row["body"]), {"kind": row["kind"], "version": version})
            producer.index_document(PUSHED, doc, str(row["body"]), {"kind": row["kind"], "version": version})
        self.unsent.discard(doc)

    def resend(self) -> None:
        """Push again each document whose last push the broker refused."""
        producer = Producer(self.system.settings)
        try:
            for doc in sorted(self.unsent):
                state = self.documents.get(doc)
                if state is None:
                    producer.delete_document(PUSHED, doc)
                else:
                    producer.index_document(PUSHED, doc, state[0], state[1])
            self.unsent.clear()
        finally:
            producer.close()


def _reopened(sql: Psql, database: str) -> Psql:
    """A writer connection that may have died with the server: a new one (or the old one, if that fails)."""
    try:
        fresh = Psql(database)
    except Exception:
        return sql
    sql.close()
    return fresh
