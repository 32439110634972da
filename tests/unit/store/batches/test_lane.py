"""The lane's steps on the reference parts (``MemoryLaneState``, ``MemoryEndpoint``): texts queued once, sent
in jobs cut to the limits, answers held by text, failed and unrun lines to the chain or a new job, a crash
between the provider taking a job and the state recording it bought once."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from store.batches.endpoint import Request
from store.batches.lane import RunLane, cut, tick
from store.batches.memory import MemoryLaneState
from store.batches.memory_endpoint import MemoryEndpoint
from store.batches.state import CLAIMED
from store.embeddings.providers.base import Limits
from store.embeddings.providers.fake import FakeProvider, hash_embed
from store.vectors.records import text_digest

DIMENSIONS = 8
LIMITS = Limits(max_inputs=3, max_tokens_per_request=10_000, max_tokens_per_input=1000)
MODELS = {"fake": (LIMITS, "fake")}


def texts(count: int) -> list[str]:
    return [f"text number {i}" for i in range(count)]


def queued(state: MemoryLaneState, items: Sequence[str], run: str = "run") -> None:
    RunLane(state, run, frozenset({"fake"})).queue("fake", items)


def look(state: MemoryLaneState, endpoint: MemoryEndpoint, *, requeue: bool = False) -> None:
    tick(state, lambda _model: endpoint, "run", models=MODELS, requeue_failed=requeue)


@pytest.fixture
def state() -> MemoryLaneState:
    return MemoryLaneState()


@pytest.fixture
def endpoint() -> MemoryEndpoint:
    return MemoryEndpoint(FakeProvider(name="fake", model="fake", dimensions=DIMENSIONS), max_requests=2)


def test_queued_texts_go_out_in_jobs_cut_to_the_limits_and_come_back_held(
    state: MemoryLaneState, endpoint: MemoryEndpoint
) -> None:
    queued(state, texts(10))
    queued(state, texts(4))  # queued again by another batch: still once
    look(state, endpoint)
    jobs = endpoint.open()
    assert len(jobs) == 2  # 10 texts, 3 a request, 2 requests a job: 6 + 4
    assert [endpoint.job(j).total for j in jobs] == [2, 2]
    for job in jobs:
        endpoint.finish(job)
    look(state, endpoint)
    held = state.held("run", "fake", [text_digest(t) for t in texts(10)])
    assert {h: x.vector for h, x in held.items()} == {text_digest(t): hash_embed(t, DIMENSIONS) for t in texts(10)}
    assert sorted(endpoint.bought) == sorted(texts(10))  # each text bought once
    assert state.counts("run").held == 10 and all(not s.open for s in state.submissions("run"))


def test_a_run_lane_finds_held_vectors_after_stored_ones(state: MemoryLaneState, endpoint: MemoryEndpoint) -> None:
    queued(state, ["a b", "c d"])
    look(state, endpoint)
    endpoint.finish(endpoint.open()[0])
    look(state, endpoint)

    def stored(asked: list[str]) -> Mapping[str, Sequence[float]]:
        return {"stored one": [1.0] * DIMENSIONS} if "stored one" in asked else {}

    writing = RunLane(state, "run")
    found = writing.reuse(stored, "fake")(["a b", "stored one", "never queued"])
    assert found == {"stored one": [1.0] * DIMENSIONS, "a b": hash_embed("a b", DIMENSIONS)}
    assert writing.elsewhere == {"never queued"}  # what the chain will buy, counted by the batch
    assert not RunLane(state, "run").gathers("fake") and RunLane(state, "run", frozenset({"fake"})).gathers("fake")


def test_failed_and_unrun_lines_go_to_the_chain_counted(state: MemoryLaneState, endpoint: MemoryEndpoint) -> None:
    queued(state, texts(6))
    look(state, endpoint)
    endpoint.finish(endpoint.open()[0], done=1)  # expired after its first line: the second never ran
    look(state, endpoint)
    counts = state.counts("run")
    assert (counts.held, counts.failed, counts.queued, counts.out) == (3, 3, 0, 0)
    failed = [h for h, x in state.held("run", "fake", [text_digest(t) for t in texts(6)]).items() if x.error]
    assert all("not run" in (state.held("run", "fake", [h])[h].error or "") for h in failed)
    assert state.tallies("run") == {"unrun": 3}


def test_with_requeue_failed_lines_go_out_again_in_a_new_job(state: MemoryLaneState, endpoint: MemoryEndpoint) -> None:
    queued(state, texts(6))
    look(state, endpoint, requeue=True)
    endpoint.finish(endpoint.open()[0], fail=[1])
    look(state, endpoint, requeue=True)  # read, requeued and sent again in one look
    assert state.tallies("run") == {"failed": 3}
    assert len(state.submissions("run")) == 2 and len(endpoint.open()) == 1
    endpoint.finish(endpoint.open()[0])
    look(state, endpoint, requeue=True)
    assert state.counts("run").held == 6
    assert sorted(endpoint.bought) == sorted(texts(6))  # the failed line was not billed, then bought once


def test_a_job_sent_before_a_crash_is_found_by_its_tag_not_bought_again(
    state: MemoryLaneState, endpoint: MemoryEndpoint
) -> None:
    queued(state, texts(3))
    tag = "run-1"
    state.claim(tag, "run", "fake", [[text_digest(t) for t in texts(3)]])
    endpoint.submit([Request(f"{tag}-0", texts(3))], tag=tag)  # the provider took it; the process died here
    assert state.submissions("run")[0].status == CLAIMED
    look(state, endpoint)
    assert len(endpoint.open()) == 1  # found, not sent twice
    assert state.submissions("run")[0].job_id == endpoint.open()[0]


def test_a_claimed_job_the_provider_never_got_is_sent(state: MemoryLaneState, endpoint: MemoryEndpoint) -> None:
    queued(state, texts(3))
    state.claim("run-1", "run", "fake", [[text_digest(t) for t in texts(3)]])
    look(state, endpoint)
    assert len(endpoint.open()) == 1
    endpoint.finish(endpoint.open()[0])
    look(state, endpoint)
    assert state.counts("run").held == 3


def test_a_full_queue_refusal_is_waited_out_not_sent_again_in_the_same_look(
    state: MemoryLaneState, endpoint: MemoryEndpoint
) -> None:
    queued(state, texts(3))
    look(state, endpoint)
    job = endpoint.open()[0]
    endpoint.refuse(job)
    look(state, endpoint)
    assert state.counts("run").queued == 3 and not endpoint.open()  # back in the queue, waiting
    look(state, endpoint)
    assert len(endpoint.open()) == 1  # the next look sends it again


def test_cut_keeps_a_job_within_its_requests_and_bytes() -> None:
    items = [(str(i), "word " * 50) for i in range(30)]
    lines = cut(items, limits=LIMITS, model="fake", max_requests=4, max_bytes=10**9)
    assert [len(line) for line in lines] == [3, 3, 3, 3]
    assert len(cut(items, limits=LIMITS, model="fake", max_requests=100, max_bytes=2000)) == 2
    assert len(cut(items, limits=LIMITS, model="fake", max_requests=100, max_bytes=1)) == 1  # at least one line
