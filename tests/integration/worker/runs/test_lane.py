"""The batch lane with real workers, PostgreSQL and the fake OpenAI server speaking the Batch API: a first load
through ``reindex --batch`` ends done with every record current, nothing bought synchronously and every text
bought once, its spend at the lane's price; every worker killed while its job is out, then started again, ends
the same way; a job that expires half done hands the rest to the failover chain, counted."""

from __future__ import annotations

import signal
import time

import openai
import psutil
import pytest

from store.state.ledger import RunStatus
from tests.fake_openai import FakeOpenAI
from tests.integration.worker.lane_world import RECORDS, Lane, assert_bought_once_at_the_lane_s_price, lane, started
from tests.workers import celery_worker, run_cli, wait_for

__all__ = ["lane"]

pytestmark = pytest.mark.slow


def test_a_first_load_through_the_lane_is_current_and_bought_once_at_half_price(lane: Lane) -> None:
    assert run_cli(lane.config, "init").returncode == 0
    with celery_worker(lane.config, concurrency=2):
        run_id = started(lane)
        done = lane.ended(run_id)
    assert done.status == RunStatus.DONE, done.error
    assert (done.done, done.failed, done.total, done.lane) == (RECORDS, 0, RECORDS, "batch")
    assert lane.stored() == lane.expected()
    assert_bought_once_at_the_lane_s_price(lane, run_id)
    view = run_cli(lane.config, "status", run_id[:10]).stdout
    assert "batch job" in view and "completed" in view


def test_every_worker_killed_while_the_job_is_out_then_started_again_ends_done_bought_once(lane: Lane) -> None:
    lane.openai.batch_seconds = 6.0
    assert run_cli(lane.config, "init").returncode == 0
    with celery_worker(lane.config, concurrency=2) as worker:
        run_id = started(lane)
        wait_for(
            lambda: (
                lane.openai.batch_api_calls
                and any(
                    path.startswith("/v1/batches") and method == "POST" for method, path in lane.openai.batch_api_calls
                )
            ),
            timeout=60,
            what="the job to be sent",
        )
        for process in [psutil.Process(worker.pid), *psutil.Process(worker.pid).children(recursive=True)]:
            process.send_signal(signal.SIGKILL)
        worker.wait(timeout=10)
    assert not lane.run(run_id).status.ended
    with celery_worker(lane.config, concurrency=2, name="w2"):
        done = lane.ended(run_id, timeout=180)
    assert done.status == RunStatus.DONE, done.error
    assert lane.stored() == lane.expected()
    assert_bought_once_at_the_lane_s_price(lane, run_id)


def test_a_job_that_expires_half_done_hands_the_rest_to_the_chain(lane: Lane) -> None:
    lane.openai.push_batch(expire_after=0.5)
    assert run_cli(lane.config, "init").returncode == 0
    with celery_worker(lane.config, concurrency=2):
        run_id = started(lane)
        done = lane.ended(run_id)
    assert done.status == RunStatus.DONE, done.error
    assert lane.stored() == lane.expected()
    texts = {text for text, _ in lane.expected().values()}
    by_batch = {text for job in lane.openai.batch_inputs() for text in job}
    assert lane.openai.batch_served_lines > 0 and lane.openai.served_calls > 0  # half each way
    assert lane.openai.batch_served_tokens + lane.openai.served_tokens == lane.needed_tokens()
    chain = {
        text for request in lane.openai.requests if request.path.endswith("/embeddings") for text in request.inputs
    }
    assert by_batch | chain == texts and not by_batch & chain  # the chain bought only what the job did not answer
    tally = lane.tally(run_id)
    assert tally["unrun"] > 0 and tally["chain"] == len(chain) and "failed" not in tally
    said = " ".join(run_cli(lane.config, "status", run_id[:10]).stdout.split())
    assert f"{tally['unrun']:,} texts of an expired or cancelled job" in said
    assert f"{tally['chain']:,} texts bought through the chain when written" in said


def test_a_reconcile_sweep_of_a_collection_whose_runs_go_through_the_lane(lane: Lane) -> None:
    assert run_cli(lane.config, "init").returncode == 0
    with celery_worker(lane.config, concurrency=2):
        begun = run_cli(lane.config, "reconcile", lane.collection)
        assert begun.returncode == 0, begun.stdout + begun.stderr
        run_id = begun.stdout.split()[1]
        done = lane.ended(run_id)
    assert (done.status, done.kind, done.lane) == (RunStatus.DONE, "reconcile", "batch"), done.error
    assert lane.stored() == lane.expected()
    assert_bought_once_at_the_lane_s_price(lane, run_id)


def job_sent(lane: Lane) -> bool:
    return any(method == "POST" and path == "/v1/batches" for method, path in lane.openai.batch_api_calls)


def test_the_provider_down_while_the_job_is_out_then_back_ends_done(lane: Lane) -> None:
    lane.openai.batch_seconds = 4.0
    assert run_cli(lane.config, "init").returncode == 0
    with celery_worker(lane.config, concurrency=2):
        run_id = started(lane)
        wait_for(lambda: job_sent(lane), timeout=60, what="the job to be sent")
        lane.openai.stop()  # looks fail while it is down, and go on
        time.sleep(3)
        with FakeOpenAI(dimensions=8, state_dir=lane.openai.state_dir, port=lane.openai.port) as again:
            done = lane.ended(run_id)
    assert done.status == RunStatus.DONE, done.error
    assert lane.stored() == lane.expected()
    assert again.served_calls == 0 and again.batch_served_tokens == lane.needed_tokens()


def test_a_cancelled_run_cancels_its_job_and_keeps_nothing_of_its_texts(lane: Lane) -> None:
    lane.openai.push_batch(stall_after=0.3)
    assert run_cli(lane.config, "init").returncode == 0
    with celery_worker(lane.config, concurrency=2):
        run_id = started(lane)
        wait_for(lambda: job_sent(lane), timeout=60, what="the job to be sent")
        cancelled = run_cli(lane.config, "runs", "cancel", run_id[:10])
        assert cancelled.returncode == 0 and f"run {run_id} cancelled" in cancelled.stdout, cancelled.stderr
        ended = lane.run(run_id)
        assert ended.status == RunStatus.FAILED and "cancelled" in ended.error

        def job_cancelled() -> bool:
            client = openai.OpenAI(base_url=lane.openai.url, api_key="unused")
            return [b.status for b in client.batches.list()] == ["cancelled"]

        wait_for(job_cancelled, timeout=60, what="the job to be cancelled at the provider")
        wait_for(lambda: lane.texts_held(run_id) == 0, timeout=60, what="the run's texts to be forgotten")
    again = run_cli(lane.config, "runs", "cancel", run_id[:10])
    assert again.returncode != 0 and "has ended" in again.stderr
