"""What producers and workers agree on: a change to a value here breaks the wire between versions, so the values
are pinned, and the tables of routes, queues and prefixes hold together."""

from __future__ import annotations

import store.contract as contract
from store.contract import QUEUES, ROUTES, WORKER_COMMAND, RunStatus, pending_key


def test_the_task_names_and_queues_on_the_wire_are_these() -> None:
    assert ROUTES == {
        "vectorsync.index_record": "vectorsync.live",
        "vectorsync.index_document": "vectorsync.live",
        "vectorsync.index_batch": "vectorsync.bulk",
        "vectorsync.reindex_all": "vectorsync.bulk",
        "vectorsync.reconcile": "vectorsync.bulk",
        "vectorsync.build_index": "vectorsync.bulk",
        "vectorsync.verify": "vectorsync.bulk",
        "vectorsync.lane_tick": "vectorsync.bulk",
    }
    assert QUEUES == ("vectorsync.live", "vectorsync.bulk")
    assert WORKER_COMMAND == "celery -A worker worker -Q vectorsync.live,vectorsync.bulk"


def test_every_redis_key_prefix_is_vectorsync_s_own_and_none_holds_another() -> None:
    prefixes = [value for name, value in vars(contract).items() if name.endswith("_KEY_PREFIX")]
    assert len(prefixes) == 9 and all(p.startswith("vectorsync:") and p.endswith(":") for p in prefixes)
    assert not [a for a in prefixes for b in prefixes if a != b and b.startswith(a)]
    assert pending_key("notes", "42") == "vectorsync:pending:notes:42"


def test_a_run_has_ended_once_done_or_failed_and_a_paused_one_has_not() -> None:
    assert [status for status in RunStatus if status.ended] == [RunStatus.DONE, RunStatus.FAILED]
    assert [status.value for status in RunStatus] == ["running", "indexing", "done", "failed", "paused"]
