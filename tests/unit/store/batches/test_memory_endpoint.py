"""The reference endpoint answers as a provider does: whole, part-way, some lines failed, refused; it bills only
the lines it answered, and finds a job by its tag."""

from __future__ import annotations

from store.batches.endpoint import Request
from store.batches.memory_endpoint import MemoryEndpoint
from store.embeddings.providers.fake import FakeProvider, hash_embed


def endpoint() -> MemoryEndpoint:
    return MemoryEndpoint(FakeProvider(dimensions=4))


def test_a_finished_job_answers_each_line_and_bills_only_those_it_ran() -> None:
    fake = endpoint()
    job = fake.submit([Request("t-0", ["a"]), Request("t-1", ["b c"]), Request("t-2", ["d"])], tag="t")
    assert fake.find("t") == job and fake.find("u") is None and fake.open() == [job.id]
    ended = fake.finish(job.id, done=2, fail=[1], status="expired")
    assert (ended.status, ended.completed, ended.failed) == ("expired", 1, 2)
    answers = {a.custom_id: a for a in fake.answers(ended)}
    assert answers["t-0"].vectors == [hash_embed("a", 4)] and answers["t-0"].tokens == 1
    assert answers["t-1"].error == "500: scripted failure" and "not run" in (answers["t-2"].error or "")
    assert fake.bought == ["a"] and fake.open() == []


def test_a_refused_job_fails_at_validation_with_the_code() -> None:
    fake = endpoint()
    job = fake.submit([Request("t-0", ["a"])], tag="t")
    refused = fake.refuse(job.id)
    assert refused.status == "failed" and refused.queue_full and fake.bought == []
