"""The fake OpenAI server's Batch API (tests/fake_batches.py), driven by the real openai client: a batch's output
is what /v1/embeddings answers (JSON floats or base64), an input file OpenAI would refuse fails validation with its
code, scripted lines fail into the error file, batches list newest first in pages, and a batch keeps its clock."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import openai
import pytest
from openai.types import CreateEmbeddingResponse

from tests.fake_bodies import cl100k_tokens, served_embed
from tests.fake_openai import FakeOpenAI
from tests.unit.kit.batches import client_of, jsonl, line, lines, read, submit, wait

DIMENSIONS = 16


@pytest.fixture
def server(tmp_path: Path) -> Iterator[FakeOpenAI]:
    with FakeOpenAI(dimensions=DIMENSIONS, state_dir=tmp_path / "state") as fake:
        yield fake


def synchronous(client: openai.OpenAI, body: dict[str, Any]) -> dict[str, Any]:
    """What /v1/embeddings answers the very same ``body`` (the client's ``embeddings.create`` would ask base64)."""
    answer: dict[str, Any] = client.post("/embeddings", body=body, cast_to=httpx.Response).json()
    return answer


def by_index(body: dict[str, Any]) -> list[Any]:
    return [item["embedding"] for item in sorted(body["data"], key=lambda item: item["index"])]


def test_a_completed_batch_answers_each_line_as_the_embeddings_endpoint_does(server: FakeOpenAI) -> None:
    client, requests = client_of(server), lines(5)
    created = submit(client, requests, job="nightly")
    assert (created.status, created.endpoint, created.metadata) == ("validating", "/v1/embeddings", {"job": "nightly"})
    batch = wait(client, created.id, "completed")
    assert batch.request_counts is not None
    assert (batch.request_counts.total, batch.request_counts.completed, batch.request_counts.failed) == (5, 5, 0)
    assert batch.error_file_id is None and batch.errors is None
    assert batch.created_at <= (batch.in_progress_at or 0) <= (batch.finalizing_at or 0) <= (batch.completed_at or 0)
    output = read(client, batch.output_file_id)
    assert sorted(o["custom_id"] for o in output) == [f"r{i}" for i in range(5)]
    assert [o["custom_id"] for o in output] != [r["custom_id"] for r in requests]  # matched by custom_id, not order
    for answer in output:
        request = next(r for r in requests if r["custom_id"] == answer["custom_id"])
        assert answer["id"].startswith("batch_req_") and answer["error"] is None
        assert answer["response"]["status_code"] == 200 and answer["response"]["request_id"]
        parsed = CreateEmbeddingResponse.model_validate(answer["response"]["body"])
        assert parsed.usage.prompt_tokens == sum(cl100k_tokens(text) for text in request["body"]["input"])
        assert by_index(answer["response"]["body"]) == by_index(synchronous(client, request["body"]))
    with pytest.raises(openai.BadRequestError, match="purpose: batch"):
        client.files.content(batch.input_file_id)  # OpenAI keeps input files to itself
    assert client.files.delete(batch.output_file_id or "").deleted
    with pytest.raises(openai.NotFoundError):
        client.files.content(batch.output_file_id or "")


@pytest.mark.parametrize("dense", [False, True])
def test_base64_lines_carry_the_synchronous_vectors_bit_for_bit(tmp_path: Path, dense: bool) -> None:
    with FakeOpenAI(dimensions=DIMENSIONS, dense=dense, state_dir=tmp_path) as server:
        client, requests = client_of(server), lines(3, encoding_format="base64", dimensions=8)
        batch = wait(client, submit(client, requests).id, "completed")
        for answer in read(client, batch.output_file_id):
            request = next(r for r in requests if r["custom_id"] == answer["custom_id"])
            vectors = by_index(answer["response"]["body"])
            assert all(isinstance(vector, str) for vector in vectors)
            assert vectors == by_index(synchronous(client, request["body"]))
            decoded = [np.frombuffer(base64.b64decode(vector), dtype="<f4").tolist() for vector in vectors]
            if not dense:
                assert decoded == [served_embed(text, 8) for text in request["body"]["input"]]
            assert all(len(vector) == 8 for vector in decoded)


@pytest.mark.parametrize(
    ("content", "settings", "code", "line_number"),
    [
        (jsonl(lines(1)) + b"{not json\n", {}, "invalid_json_line", 2),
        (jsonl([{**line("a", ["x"]), "url": "/v1/chat/completions"}]), {}, "url_mismatch", 1),
        (jsonl([line("a", ["x"]), line("b", ["y"]), line("a", ["z"])]), {}, "duplicate_custom_id", 3),
        (jsonl([{**line("a", ["x"]), "body": {"model": "m"}}]), {}, "missing_required_parameter", 1),
        (jsonl([line("a", ["x"], model="one"), line("b", ["y"], model="two")]), {}, "model_mismatch", None),
        (jsonl(lines(3)), {"max_batch_lines": 2}, "too_many_tasks", None),
        (jsonl(lines(3)), {"max_batch_bytes": 100}, "file_too_large", None),
        (b"\n", {}, "empty_file", None),
    ],
)
def test_an_input_file_openai_would_refuse_fails_validation_with_its_code(
    tmp_path: Path, content: bytes, settings: dict[str, Any], code: str, line_number: int | None
) -> None:
    with FakeOpenAI(state_dir=tmp_path, **settings) as server:
        client = client_of(server)
        created = submit(client, content)
        assert created.status == "validating"
        batch = wait(client, created.id, "failed")
        assert batch.errors is not None and batch.errors.data is not None
        assert [(error.code, error.line) for error in batch.errors.data] == [(code, line_number)]
        assert batch.failed_at is not None and batch.in_progress_at is None
        assert (batch.output_file_id, batch.error_file_id) == (None, None)
        assert (server.batch_served_lines, server.batch_inputs()) == (0, [])


def test_a_scripted_validation_failure_fails_the_next_batch_only(server: FakeOpenAI) -> None:
    client = client_of(server)
    server.push_batch(invalid="the file is not what the test wants")
    refused, accepted = submit(client, lines(2)), submit(client, lines(2))
    batch = wait(client, refused.id, "failed")
    assert batch.errors is not None and batch.errors.data is not None
    assert [(e.code, e.message) for e in batch.errors.data] == [
        ("invalid_request", "the file is not what the test wants")
    ]
    assert wait(client, accepted.id, "completed").output_file_id is not None


def test_scripted_and_refused_lines_go_to_the_error_file_with_their_status(server: FakeOpenAI) -> None:
    client, requests = client_of(server), lines(9)
    requests[6]["body"]["input"] = ["a poison record"]
    server.reject_containing = "poison"  # the server's refusal applies to a batch line as to a call
    server.push_batch(failing={"r1"}, fail_every=4, fail_status=503)
    batch = wait(client, submit(client, requests).id, "completed")
    assert batch.request_counts is not None
    assert (batch.request_counts.completed, batch.request_counts.failed) == (5, 4)
    failed = {e["custom_id"]: e for e in read(client, batch.error_file_id)}
    assert {cid: e["response"]["status_code"] for cid, e in failed.items()} == {
        "r1": 503,
        "r3": 503,
        "r7": 503,
        "r6": 400,
    }
    assert all(e["error"] is None and "message" in e["response"]["body"]["error"] for e in failed.values())
    assert sorted(o["custom_id"] for o in read(client, batch.output_file_id)) == ["r0", "r2", "r4", "r5", "r8"]
    assert server.batch_served_lines == 5
    assert server.batch_inputs() == [
        [t for r in requests if r["custom_id"] in "r0 r2 r4 r5 r8" for t in r["body"]["input"]]
    ]


def test_batches_list_newest_first_in_pages_after_a_cursor(server: FakeOpenAI) -> None:
    client = client_of(server)
    ids = [submit(client, lines(1)).id for _ in range(5)][::-1]
    first = client.batches.list(limit=2)
    assert ([b.id for b in first.data], first.has_more) == (ids[:2], True)
    second = client.batches.list(limit=2, after=first.data[-1].id)
    assert ([b.id for b in second.data], second.has_more) == (ids[2:4], True)
    last = client.batches.list(limit=2, after=second.data[-1].id)
    assert ([b.id for b in last.data], last.has_more) == (ids[4:], False)
    assert [b.id for b in client.batches.list(limit=2)] == ids  # the client's own paging follows ``after``
    with pytest.raises(openai.NotFoundError):
        client.batches.list(after="batch_unknown")


def test_a_batch_takes_the_seconds_it_is_given(server: FakeOpenAI) -> None:
    client = client_of(server)
    server.batch_seconds = 3600.0  # validating for its first 6 minutes
    slow = submit(client, lines(1))
    server.push_batch(seconds=0.0)
    quick = submit(client, lines(1))
    assert (quick.status, read(client, quick.output_file_id)[0]["custom_id"]) == ("completed", "r0")  # ended at once
    assert client.batches.retrieve(slow.id).status == "validating"
    assert slow.expires_at == slow.created_at + 24 * 3600


def test_requests_the_api_refuses_are_answered_with_openai_errors(server: FakeOpenAI) -> None:
    client = client_of(server)
    with pytest.raises(openai.NotFoundError):
        client.batches.retrieve("batch_unknown")
    with pytest.raises(openai.NotFoundError):
        client.batches.create(input_file_id="file-unknown", endpoint="/v1/embeddings", completion_window="24h")
    upload = client.files.create(file=("in.jsonl", jsonl(lines(1))), purpose="batch")
    with pytest.raises(openai.BadRequestError, match="/v1/embeddings only"):
        client.batches.create(input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="24h")
    assert client.files.retrieve(upload.id).bytes == len(jsonl(lines(1)))
    assert ("POST", "/v1/files") in server.batch_api_calls and server.calls == 0  # not in the embeddings requests
