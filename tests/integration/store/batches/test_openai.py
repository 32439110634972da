"""``OpenAIBatchEndpoint`` against the fake OpenAI server, through the real ``openai`` client: a job sent, found
by its tag, polled and read back as the synchronous endpoint answers; failed and expired lines answered with
their errors; a full queue read as such; a cancel."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from store.batches.endpoint import Job, Request
from store.batches.openai import OpenAIBatchEndpoint
from store.embeddings.providers.openai import OpenAIProvider
from store.settings import ModelSettings
from tests.fake_openai import FakeOpenAI

DIMENSIONS = 8


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(dimensions=DIMENSIONS) as fake:
        yield fake


def settings_of(server: FakeOpenAI) -> ModelSettings:
    return ModelSettings.model_validate(
        {
            "provider": "openai",
            "model": "text-embedding-3-small",
            "dimensions": DIMENSIONS,
            "base_url": server.url,
            "batch": {"price_per_million_tokens": 0.01},
        }
    )


def endpoint_of(server: FakeOpenAI) -> OpenAIBatchEndpoint:
    return OpenAIBatchEndpoint(name="small", settings=settings_of(server))


def finished(endpoint: OpenAIBatchEndpoint, job: Job, timeout: float = 20) -> Job:
    deadline = time.monotonic() + timeout
    while not (job := endpoint.job(job.id)).finished:
        assert time.monotonic() < deadline, f"job {job.id} still {job.status}"
        time.sleep(0.05)
    return job


def requests(tag: str) -> list[Request]:
    return [Request(f"{tag}-0", ["alpha beta", "gamma"]), Request(f"{tag}-1", ["delta epsilon zeta"])]


def test_a_job_comes_back_as_the_synchronous_endpoint_answers(server: FakeOpenAI) -> None:
    endpoint = endpoint_of(server)
    job = endpoint.submit(requests("run-1"), tag="run-1")
    found = endpoint.find("run-1")  # its status may move on between two reads: the server's clock runs the job
    assert found is not None and found.id == job.id and endpoint.find("run-2") is None
    job = finished(endpoint, job)
    assert (job.status, job.total, job.completed, job.failed) == ("completed", 2, 2, 0)
    answers = {a.custom_id: a for a in endpoint.answers(job)}
    assert sum(a.tokens for a in answers.values()) == server.batch_served_tokens > 0
    assert server.served_calls == 0  # nothing bought synchronously
    synchronous = OpenAIProvider(name="small", settings=settings_of(server)).embed_batch(
        ["alpha beta", "gamma", "delta epsilon zeta"]
    )
    assert answers["run-1-0"].vectors == synchronous[:2] and answers["run-1-1"].vectors == synchronous[2:]


def test_failed_and_expired_lines_are_answered_with_their_errors(server: FakeOpenAI) -> None:
    endpoint = endpoint_of(server)
    server.push_batch(failing={"run-1-1"})
    job = finished(endpoint, endpoint.submit(requests("run-1"), tag="run-1"))
    answers = {a.custom_id: a for a in endpoint.answers(job)}
    assert answers["run-1-0"].vectors is not None and answers["run-1-1"].vectors is None
    assert answers["run-1-1"].error and "500" in answers["run-1-1"].error
    server.push_batch(expire_after=0.5)
    job = finished(endpoint, endpoint.submit(requests("run-2"), tag="run-2"))
    assert job.status == "expired"
    errors = [a.error for a in endpoint.answers(job) if a.vectors is None]
    assert len(errors) == 1 and "batch_expired" in (errors[0] or "")


def test_a_full_queue_is_read_as_such(server: FakeOpenAI) -> None:
    endpoint = endpoint_of(server)
    server.queued_token_limit = 1
    job = finished(endpoint, endpoint.submit(requests("run-1"), tag="run-1"))
    assert job.status == "failed" and job.queue_full and list(endpoint.answers(job)) == []


def test_a_cancelled_job_keeps_what_it_did(server: FakeOpenAI) -> None:
    endpoint = endpoint_of(server)
    server.push_batch(stall_after=0.5)
    job = endpoint.submit(requests("run-1"), tag="run-1")
    deadline = time.monotonic() + 20
    while endpoint.job(job.id).completed < 1:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    endpoint.cancel(job.id)
    job = finished(endpoint, job)
    assert job.status == "cancelled"
    answers = list(endpoint.answers(job))
    assert sum(a.vectors is not None for a in answers) == 1 and sum(a.vectors is None for a in answers) == 1
