"""How the fake OpenAI server's batches end other than complete, through the real openai client: expired or
cancelled part way (what ran in the output file, the rest in the error file), refused for too many queued tokens,
carried on by a server restarted on the same state_dir; and what batches served, each line counted once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from tests.fake_bodies import cl100k_tokens
from tests.fake_openai import FakeOpenAI
from tests.unit.kit.batches import client_of, lines, read, submit, wait, wait_until


@pytest.fixture
def server(tmp_path: Path) -> Iterator[FakeOpenAI]:
    with FakeOpenAI(state_dir=tmp_path / "state") as fake:
        yield fake


def ids(file_lines: list[dict[str, object]]) -> list[str]:
    return sorted((str(line["custom_id"]) for line in file_lines), key=lambda cid: int(cid[1:]))


def completed(batch: openai.types.Batch) -> int:
    assert batch.request_counts is not None
    return batch.request_counts.completed


def test_a_batch_expires_with_its_first_lines_done_and_the_rest_batch_expired(server: FakeOpenAI) -> None:
    client = client_of(server)
    server.push_batch(expire_after=0.5)
    batch = wait(client, submit(client, lines(10)).id, "expired")
    assert batch.expired_at is not None and batch.completed_at is None and completed(batch) == 5
    assert ids(read(client, batch.output_file_id)) == [f"r{i}" for i in range(5)]
    skipped = read(client, batch.error_file_id)
    assert ids(skipped) == [f"r{i}" for i in range(5, 10)]
    assert all(line["response"] is None and line["error"]["code"] == "batch_expired" for line in skipped)
    assert server.batch_served_lines == 5


def test_a_cancelled_batch_keeps_what_it_ran_and_marks_the_rest_batch_cancelled(server: FakeOpenAI) -> None:
    client = client_of(server)
    server.push_batch(stall_after=0.3)  # runs 3 lines of 10, then waits for the cancel
    created = submit(client, lines(10))
    stalled = wait_until(client, created.id, lambda batch: completed(batch) == 3, "3 lines done")
    assert stalled.status == "in_progress"
    cancelling = client.batches.cancel(created.id)
    assert cancelling.status == "cancelling" and cancelling.cancelling_at is not None
    batch = wait(client, created.id, "cancelled")
    assert batch.cancelled_at is not None and completed(batch) == 3
    assert ids(read(client, batch.output_file_id)) == ["r0", "r1", "r2"]
    skipped = read(client, batch.error_file_id)
    assert ids(skipped) == [f"r{i}" for i in range(3, 10)]
    assert all(line["response"] is None and line["error"]["code"] == "batch_cancelled" for line in skipped)
    assert client.batches.cancel(created.id).status == "cancelled"  # cancelling again changes nothing
    done = wait(client, submit(client, lines(1)).id, "completed")
    with pytest.raises(openai.ConflictError):
        client.batches.cancel(done.id)


def test_a_cancel_stops_a_batch_where_it_is_running_or_validating(server: FakeOpenAI) -> None:
    client = client_of(server)
    server.cancel_seconds = 0.5  # long enough for lines to pass, were a cancelling batch still running them
    server.push_batch(seconds=5.0)  # a line each 0.08 s from 0.5 s on
    running = submit(client, lines(50))
    wait_until(client, running.id, lambda batch: completed(batch) >= 1, "a line done")
    ran = completed(client.batches.cancel(running.id))
    batch = wait(client, running.id, "cancelled")
    assert completed(batch) == ran >= 1
    assert (len(read(client, batch.output_file_id)), len(read(client, batch.error_file_id))) == (ran, 50 - ran)
    server.push_batch(seconds=3600.0)
    validating = submit(client, lines(3)).id
    client.batches.cancel(validating)
    batch = wait(client, validating, "cancelled")
    assert (batch.in_progress_at, batch.output_file_id, completed(batch)) == (None, None, 0)
    assert ids(read(client, batch.error_file_id)) == ["r0", "r1", "r2"]


def test_a_batch_over_its_models_queued_token_cap_fails_with_token_limit_exceeded(server: FakeOpenAI) -> None:
    client = client_of(server)
    first, second = lines(4), lines(3)
    tokens = [sum(cl100k_tokens(t) for r in requests for t in r["body"]["input"]) for requests in (first, second)]
    server.queued_token_limit = sum(tokens) - 1
    server.push_batch(stall_after=0.0)  # holds its tokens in the queue until cancelled
    queued = submit(client, first)
    refused = wait(client, submit(client, second).id, "failed")
    assert refused.errors is not None and refused.errors.data is not None
    assert [e.code for e in refused.errors.data] == ["token_limit_exceeded"]
    assert "Enqueued token limit reached for text-embedding-test" in str(refused.errors.data[0].message)
    other_model = submit(client, lines(3, model="text-embedding-other"))  # each model has its own queue
    assert wait(client, other_model.id, "completed").output_file_id is not None
    client.batches.cancel(queued.id)
    wait(client, queued.id, "cancelled")
    assert wait(client, submit(client, second).id, "completed").output_file_id is not None


def test_a_server_restarted_on_the_same_state_dir_carries_on_its_batches(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with FakeOpenAI(state_dir=state) as before:
        client = client_of(before)
        finished = wait(client, submit(client, lines(2)).id, "completed")
        output = read(client, finished.output_file_id)
        before.push_batch(stall_after=0.5)
        stalled = wait_until(client, submit(client, lines(4)).id, lambda b: completed(b) == 2, "2 lines done").id
        before.push_batch(seconds=1.0)
        running = submit(client, lines(3)).id
    with pytest.raises(openai.APIConnectionError):  # down: as a provider that cannot be reached
        client.batches.retrieve(running)
    with FakeOpenAI(state_dir=state, port=before.port) as after:
        assert client.batches.retrieve(finished.id).output_file_id == finished.output_file_id
        assert read(client, finished.output_file_id) == output
        batch = client.batches.retrieve(stalled)
        assert (batch.status, completed(batch)) == ("in_progress", 2)
        client.batches.cancel(stalled)
        assert ids(read(client, wait(client, stalled, "cancelled").output_file_id)) == ["r0", "r1"]
        assert ids(read(client, wait(client, running, "completed").output_file_id)) == ["r0", "r1", "r2"]
        assert [b.id for b in client.batches.list()] == [running, stalled, finished.id]
        assert after.batch_served_lines == 2 + 2 + 3  # those that ended before the restart too, once each


def test_batch_served_tokens_count_each_embedded_line_once_when_its_batch_ends(server: FakeOpenAI) -> None:
    client = client_of(server)
    server.push_batch(stall_after=0.5)
    first, second = lines(4), lines(2)
    second[0]["body"]["input"] = ["a text only the second batch has"]
    held = submit(client, first)
    wait_until(client, held.id, lambda batch: completed(batch) == 2, "2 lines done")
    assert (server.batch_served_tokens, server.batch_served_lines) == (0, 0)  # counted when the batch ends
    wait(client, submit(client, second).id, "completed")
    client.batches.cancel(held.id)
    wait(client, held.id, "cancelled")
    embedded = [[t for r in first[:2] for t in r["body"]["input"]], [t for r in second for t in r["body"]["input"]]]
    assert server.batch_inputs() == embedded
    assert server.batch_served_tokens == sum(cl100k_tokens(text) for texts in embedded for text in texts)
    assert server.batch_served_lines == 4
    for _ in range(3):  # polling again counts nothing again
        client.batches.retrieve(held.id)
    assert (server.batch_served_lines, len(server.batch_inputs())) == (4, 2)
    assert (server.served_tokens, server.served_calls) == (0, 0)  # the synchronous counts are apart
