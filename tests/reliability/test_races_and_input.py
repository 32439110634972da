"""Many updates racing over several worker processes, and hostile records mixed into good ones."""

from __future__ import annotations

import random

from tests.crm import note
from tests.reliability.conftest import Rig
from tests.workers import run_cli


def test_500_updates_to_50_records_over_4_worker_processes(rig: Rig) -> None:
    rig.crm.insert([note(i) for i in range(1, 51)])
    producer = rig.producer()
    rng = random.Random(50)
    with rig.worker("a", concurrency=2), rig.worker("b", concurrency=2):
        for version in range(1, 501):
            record = rng.randint(1, 50)
            rig.crm.update(record, body=note(record, version=version)["body"])
            if rng.random() < 0.1:
                rig.crm.delete([record])
                rig.crm.insert([note(record, version=version)])
            producer.index_record(rig.collection, record)
        rig.verify("500 updates to 50 records, 4 processes", faults=500)
    producer.close()


def test_hostile_records_fail_alone_among_good_ones(rig: Rig) -> None:
    rig.crm.insert([note(i) for i in range(1, 101)])
    rig.crm.insert(
        [
            {"id": 101, "title": "huge", "body": "word " * 120_000, "kind": "call"},  # ~2,700 chunks: over the cap
            {"id": 102, "title": "refused", "body": "the provider refuses POISON", "kind": "call"},
            {"id": 103, "title": "", "body": "", "kind": "call"},  # blank: no chunks, and that is fine
            {"id": 104, "title": "[/b] [link=http://x]markup[/link] 🎉", "body": "ünïcödé", "kind": "[b]"},
        ]
    )
    rig.crm.insert([note(i) for i in range(105, 201)])
    rig.primary.reject_containing = "POISON"
    rig.backup.reject_containing = "POISON"
    with rig.worker(concurrency=2):
        # Hostile ids: not integers, out of the id column's range, SQL text. None is in the table: they are gone.
        hostile_ids = ["abc", "99999999999999999999", "1' OR '1'='1", "-0", "\u202e5"]
        assert run_cli(rig.config, "index", rig.collection, "--", *hostile_ids).returncode == 0  # -- : "-0" is an id
        result = run_cli(rig.config, "reindex", rig.collection, "--wait", timeout=180)
        assert result.returncode == 1  # done, with failed records
        assert "done: 200 records, 198 indexed, 0 unchanged, 2 failed" in result.stdout, result.stdout
        figures = rig.verify("hostile records and ids among 196 good ones", faults=9, failures=2)
    ledger = rig.ledger()
    failures = {f.record_id: f.error for f in ledger.failures(rig.collection)}
    ledger.close()
    assert "record '101' makes " in failures["101"]
    assert "over limits.max_chunks_per_record (2000): split the record" in failures["101"]
    assert "input contains 'POISON'" in failures["102"] and "fix it in the source" in failures["102"]
    assert figures["records"] == 200
