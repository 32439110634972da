"""``LaneState`` in the state database, shared by every worker: tables ``vectorsync_lane_texts``,
``vectorsync_lane_jobs`` and ``vectorsync_lane_waiting`` (``store.state.tables``). Vectors are kept as
little-endian float32 bytes."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from store.batches.endpoint import Job
from store.batches.state import CLAIMED, Held, LaneCounts, Submission
from store.state.clock import now
from store.state.database import StateDatabase
from store.state.ledger.base import Parked
from store.state.tables import lane_jobs, lane_looks, lane_tally, lane_texts, lane_waiting

__all__ = ["PostgresLaneState"]

_texts_of = sa.and_(lane_texts.c.run_id == sa.bindparam("b_run"), lane_texts.c.model == sa.bindparam("b_model"))
_unanswered = sa.and_(lane_texts.c.vector.is_(None), lane_texts.c.error.is_(None))


def _vector(data: bytes | None) -> list[float] | None:
    return None if data is None else np.frombuffer(data, dtype="<f4").tolist()


class PostgresLaneState:
    """``LaneState`` over the ledger's state database."""

    def __init__(self, database: StateDatabase) -> None:
        self.database = database

    def queue(self, run_id: str, model: str, texts: Mapping[str, str]) -> None:
        if not texts:
            return
        rows = [{"run_id": run_id, "model": model, "text_hash": h, "text": t} for h, t in texts.items()]
        with self.database.transaction() as conn:
            conn.execute(postgresql.insert(lane_texts).on_conflict_do_nothing(), rows)

    def held(self, run_id: str, model: str, hashes: Sequence[str]) -> dict[str, Held]:
        if not hashes:
            return {}
        query = sa.select(lane_texts.c.text_hash, lane_texts.c.vector, lane_texts.c.error).where(
            _texts_of, lane_texts.c.text_hash.in_(sa.bindparam("b_hashes", expanding=True))
        )
        with self.database.reading() as conn:
            found = conn.execute(query, {"b_run": run_id, "b_model": model, "b_hashes": list(hashes)})
            return {row.text_hash: Held(_vector(row.vector), row.error) for row in found}

    def unsent(self, run_id: str, model: str, limit: int) -> list[tuple[str, str]]:
        query = (
            sa.select(lane_texts.c.text_hash, lane_texts.c.text)
            .where(_texts_of, lane_texts.c.submission.is_(None), _unanswered)
            .order_by(lane_texts.c.text_hash)
            .limit(limit)
        )
        with self.database.reading() as conn:
            return [(row.text_hash, row.text) for row in conn.execute(query, {"b_run": run_id, "b_model": model})]

    def claim(self, tag: str, run_id: str, model: str, lines: Sequence[Sequence[str]]) -> None:
        placed = [
            {
                "b_run": run_id,
                "b_model": model,
                "b_hash": digest,
                "b_tag": tag,
                "b_line": number,
                "b_position": position,
            }
            for number, line in enumerate(lines)
            for position, digest in enumerate(line)
        ]
        claim = (
            sa.update(lane_texts)
            .where(_texts_of, lane_texts.c.text_hash == sa.bindparam("b_hash"))
            .values(submission=sa.bindparam("b_tag"), line=sa.bindparam("b_line"), position=sa.bindparam("b_position"))
        )
        with self.database.transaction() as conn:
            conn.execute(
                sa.insert(lane_jobs),
                {
                    "submission": tag,
                    "run_id": run_id,
                    "model": model,
                    "status": CLAIMED,
                    "lines": len(lines),
                    "submitted_at": now(),
                },
            )
            conn.execute(claim.execution_options(synchronize_session=False), placed)

    def lines(self, tag: str) -> list[list[str]]:
        query = (
            sa.select(lane_texts.c.line, lane_texts.c.text_hash)
            .where(lane_texts.c.submission == tag)
            .order_by(lane_texts.c.line, lane_texts.c.position)
        )
        found: dict[int, list[str]] = {}
        with self.database.reading() as conn:
            for row in conn.execute(query):
                found.setdefault(row.line, []).append(row.text_hash)
        return [found[line] for line in sorted(found)]

    def texts(self, tag: str) -> dict[str, str]:
        query = sa.select(lane_texts.c.text_hash, lane_texts.c.text).where(lane_texts.c.submission == tag)
        with self.database.reading() as conn:
            return {row.text_hash: row.text for row in conn.execute(query)}

    def update(self, tag: str, job: Job, *, tokens: int = 0) -> None:
        values: dict[str, Any] = {
            "job_id": job.id,
            "status": job.status,
            "completed": job.completed,
            "failed": job.failed,
            "tokens": lane_jobs.c.tokens + tokens,
            "error": "; ".join(job.errors),
        }
        if job.finished:
            values["finished_at"] = sa.func.coalesce(lane_jobs.c.finished_at, now())
        with self.database.transaction() as conn:
            conn.execute(sa.update(lane_jobs).where(lane_jobs.c.submission == tag).values(values))

    def answer(self, run_id: str, model: str, vectors: Mapping[str, list[float]], errors: Mapping[str, str]) -> None:
        keep = (
            sa.update(lane_texts)
            .where(_texts_of, lane_texts.c.text_hash == sa.bindparam("b_hash"))
            .values(vector=sa.bindparam("b_vector"), error=None)
        )
        fail = (
            sa.update(lane_texts)
            .where(_texts_of, lane_texts.c.text_hash == sa.bindparam("b_hash"), lane_texts.c.vector.is_(None))
            .values(error=sa.bindparam("b_error"))
        )
        with self.database.transaction() as conn:
            if vectors:
                conn.execute(
                    keep,
                    [
                        {
                            "b_run": run_id,
                            "b_model": model,
                            "b_hash": h,
                            "b_vector": np.asarray(v, dtype="<f4").tobytes(),
                        }
                        for h, v in vectors.items()
                    ],
                )
            if errors:
                conn.execute(
                    fail, [{"b_run": run_id, "b_model": model, "b_hash": h, "b_error": e} for h, e in errors.items()]
                )

    def requeue(self, run_id: str, model: str, hashes: Sequence[str]) -> None:
        if not hashes:
            return
        back = (
            sa.update(lane_texts)
            .where(_texts_of, lane_texts.c.text_hash.in_(sa.bindparam("b_hashes", expanding=True)))
            .where(lane_texts.c.vector.is_(None))
            .values(submission=None, line=None, position=None, error=None)
        )
        with self.database.transaction() as conn:
            conn.execute(back, {"b_run": run_id, "b_model": model, "b_hashes": list(hashes)})

    def submissions(self, run_id: str) -> list[Submission]:
        query = sa.select(lane_jobs).where(lane_jobs.c.run_id == run_id).order_by(lane_jobs.c.submitted_at)
        with self.database.reading() as conn:
            return [
                Submission(
                    tag=row.submission,
                    run_id=row.run_id,
                    model=row.model,
                    job_id=row.job_id,
                    status=row.status,
                    lines=row.lines,
                    completed=row.completed,
                    failed=row.failed,
                    tokens=row.tokens,
                    error=row.error,
                    submitted_at=row.submitted_at,
                    finished_at=row.finished_at,
                )
                for row in conn.execute(query)
            ]

    def counts(self, run_id: str) -> LaneCounts:
        query = sa.select(
            sa.func.count().filter(_unanswered, lane_texts.c.submission.is_(None)).label("queued"),
            sa.func.count().filter(_unanswered, lane_texts.c.submission.is_not(None)).label("out"),
            sa.func.count().filter(lane_texts.c.vector.is_not(None)).label("held"),
            sa.func.count().filter(lane_texts.c.vector.is_(None), lane_texts.c.error.is_not(None)).label("failed"),
        ).where(lane_texts.c.run_id == run_id)
        with self.database.reading() as conn:
            row = conn.execute(query).one()
        return LaneCounts(row.queued, row.out, row.held, row.failed)

    @contextmanager
    def ticking(self, run_id: str) -> Iterator[bool]:
        key = sa.func.hashtextextended(f"vectorsync:lane:{run_id}", 0)
        with self.database.transaction() as conn:
            yield bool(conn.execute(sa.select(sa.func.pg_try_advisory_xact_lock(key))).scalar())

    def schedule(self, run_id: str, token: str, *, mine: str | None, due: datetime, overdue: datetime) -> bool:
        insert = postgresql.insert(lane_looks).values(run_id=run_id, token=token, due=due)
        upsert = insert.on_conflict_do_update(
            index_elements=["run_id"],
            set_={"token": token, "due": due},
            where=sa.or_(lane_looks.c.token == (mine or ""), lane_looks.c.due < overdue),
        ).returning(lane_looks.c.token)
        with self.database.transaction() as conn:
            return conn.execute(upsert).first() is not None

    def tally(self, run_id: str, counts: Mapping[str, int]) -> None:
        rows = [{"run_id": run_id, "outcome": outcome, "count": count} for outcome, count in counts.items() if count]
        if not rows:
            return
        add = postgresql.insert(lane_tally)
        add = add.on_conflict_do_update(
            index_elements=["run_id", "outcome"], set_={"count": lane_tally.c.count + add.excluded.count}
        )
        with self.database.transaction() as conn:
            conn.execute(add, rows)

    def tallies(self, run_id: str) -> dict[str, int]:
        query = sa.select(lane_tally.c.outcome, lane_tally.c.count).where(lane_tally.c.run_id == run_id)
        with self.database.reading() as conn:
            return {outcome: int(count) for outcome, count in conn.execute(query)}

    def purge(self, run_id: str) -> None:
        with self.database.transaction() as conn:
            for table in (lane_texts, lane_waiting, lane_looks):
                conn.execute(sa.delete(table).where(table.c.run_id == run_id))

    def wait(self, batch: Parked) -> None:
        message = {
            "collection": batch.collection,
            "ids": list(batch.ids),
            "carried": batch.carried,
            "fresh": batch.fresh,
        }
        row = {"run_id": batch.run_id, "batch": batch.batch, "message": message, "waited_at": now()}
        with self.database.transaction() as conn:
            conn.execute(postgresql.insert(lane_waiting).on_conflict_do_nothing(), row)

    def waiting(self, run_id: str) -> list[Parked]:
        query = sa.select(lane_waiting).where(lane_waiting.c.run_id == run_id).order_by(lane_waiting.c.batch)
        with self.database.reading() as conn:
            found = conn.execute(query).all()
        return [Parked(run_id=row.run_id, batch=row.batch, parked_at=row.waited_at, **row.message) for row in found]

    def release(self, batches: Sequence[Parked]) -> None:
        if not batches:
            return
        gone = sa.delete(lane_waiting).where(
            lane_waiting.c.run_id == sa.bindparam("b_run"), lane_waiting.c.batch == sa.bindparam("b_number")
        )
        with self.database.transaction() as conn:
            conn.execute(gone, [{"b_run": b.run_id, "b_number": b.batch} for b in batches])
