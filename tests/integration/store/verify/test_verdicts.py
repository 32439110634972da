"""The last sampled verify of each collection (store.verify.verdicts), on a real Redis: kept and read back, the
newest replacing the last; none for a collection never verified, and none kept without a Redis."""

from __future__ import annotations

import uuid

from store.verify import Report
from store.verify.verdicts import Verdict, Verdicts


def test_the_newest_verdict_of_a_collection_is_the_one_read(redis_url: str) -> None:
    verdicts = Verdicts(redis_url)
    name = f"verified_{uuid.uuid4().hex[:8]}"
    try:
        assert verdicts.last(name) is None
        verdicts.keep(name, Verdict(3, 1000, 1.5))
        verdicts.keep(name, Verdict(0, 998, 2.5))
        assert verdicts.last(name) == Verdict(0, 998, 2.5)
    finally:
        verdicts.close()


def test_a_reports_orphan_records_count_as_drifted() -> None:
    report = Report("notes", "notes", "pgvector", sample=100, records=100, drifted=2, orphan_records=1)
    verdict = Verdict.of(report)
    assert (verdict.drifted, verdict.checked) == (3, 100)


def test_without_a_redis_nothing_is_kept() -> None:
    verdicts = Verdicts("amqp://guest@localhost//")
    verdicts.keep("notes", Verdict(1, 1, 1.0))
    assert verdicts.last("notes") is None
