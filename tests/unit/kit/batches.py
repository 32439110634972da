"""What the tests of the fake OpenAI server's Batch API share: a client of the server, input files, and waiting
for a batch (by polling with a deadline, never by sleeping a guessed time)."""

from __future__ import annotations

import json
import time
from typing import Any

import openai
from openai.types import Batch

from tests.fake_openai import FakeOpenAI

__all__ = ["client_of", "jsonl", "line", "lines", "read", "submit", "wait", "wait_until"]

#: How long a test waits for a batch of the default 0.2 s before failing: far past it on a loaded machine.
DEADLINE = 20.0


def client_of(server: FakeOpenAI) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url, api_key="sk-test", max_retries=0, timeout=10.0)


def line(custom_id: str, texts: list[str], model: str = "text-embedding-test", **body: Any) -> dict[str, Any]:
    """One request of an input file."""
    request = {"model": model, "input": texts, **body}
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/embeddings", "body": request}


def lines(count: int, model: str = "text-embedding-test", **body: Any) -> list[dict[str, Any]]:
    """``count`` requests ``r0``, ``r1``... of two texts each."""
    return [
        line(f"r{i}", [f"record {i} about invoices", f"record {i} about refunds"], model, **body) for i in range(count)
    ]


def jsonl(requests: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(request) + "\n" for request in requests).encode()


def submit(client: openai.OpenAI, requests: list[dict[str, Any]] | bytes, **metadata: str) -> Batch:
    """Upload an input file and create its batch."""
    data = requests if isinstance(requests, bytes) else jsonl(requests)
    upload = client.files.create(file=("input.jsonl", data), purpose="batch")
    return client.batches.create(
        input_file_id=upload.id, endpoint="/v1/embeddings", completion_window="24h", metadata=metadata or None
    )


def wait_until(client: openai.OpenAI, batch_id: str, done: Any, what: str) -> Batch:
    """Poll the batch until ``done(batch)``, failing past the deadline."""
    deadline = time.monotonic() + DEADLINE
    while not done(batch := client.batches.retrieve(batch_id)):
        assert time.monotonic() < deadline, f"{batch_id} never got {what}: {batch.status} {batch.request_counts}"
        time.sleep(0.02)
    return batch


def wait(client: openai.OpenAI, batch_id: str, status: str) -> Batch:
    """Poll the batch until it has ``status``."""
    return wait_until(client, batch_id, lambda batch: batch.status == status, status)


def read(client: openai.OpenAI, file_id: str | None) -> list[dict[str, Any]]:
    """The lines of an output or error file, through the client's ``files.content``."""
    assert file_id is not None
    return [json.loads(text) for text in client.files.content(file_id).content.decode().splitlines()]
