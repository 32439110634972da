"""OpenAI's Batch API as a ``BatchEndpoint``: a JSON Lines file of ``/v1/embeddings`` requests uploaded with
purpose ``batch``, a job made of it with a 24 h completion window and the submission's tag in its metadata, and
its output and error files read back. openai's exceptions are translated here, as the provider's are."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any

from store.batches.endpoint import Answer, Job, Request
from store.embeddings.providers.openai import DEFAULT_OPENAI_URL, decode_vector, make_client, translate_error
from store.settings.urls import redact_url

if TYPE_CHECKING:
    from store.settings import ModelSettings

__all__ = ["TAG_KEY", "OpenAIBatchEndpoint"]

#: The metadata key a job carries its submission's tag under.
TAG_KEY = "vectorsync_submission"
#: Jobs ``find`` reads back, newest first, before it gives up on a tag.
FIND_DEPTH = 1000


class OpenAIBatchEndpoint:
    """One embedding model's jobs at an OpenAI-compatible Batch API."""

    def __init__(self, *, name: str, settings: ModelSettings, client: Any = None) -> None:
        lane = settings.batch
        if lane is None:
            raise ValueError(f"models.{name} has no [batch] lane")
        self.model = settings.model
        self.max_requests, self.max_bytes = lane.max_requests, lane.max_bytes
        self._dimensions = settings.dimensions if settings.send_dimensions else None
        self._endpoint = redact_url(settings.base_url or DEFAULT_OPENAI_URL)
        self._client = client if client is not None else make_client(name=name, settings=settings)

    def submit(self, requests: Sequence[Request], *, tag: str) -> Job:
        lines = (json.dumps(self._line(request), ensure_ascii=False) for request in requests)
        data = ("\n".join(lines) + "\n").encode()
        with self._calling():
            uploaded = self._client.files.create(file=(f"{tag}.jsonl", data), purpose="batch")
            made = self._client.batches.create(
                input_file_id=uploaded.id,
                endpoint="/v1/embeddings",
                completion_window="24h",
                metadata={TAG_KEY: tag},
            )
        return _job(made)

    def find(self, tag: str) -> Job | None:
        with self._calling():
            for seen, batch in enumerate(self._client.batches.list(limit=100)):
                if (batch.metadata or {}).get(TAG_KEY) == tag:
                    return _job(batch)
                if seen >= FIND_DEPTH:
                    return None
        return None

    def job(self, job_id: str) -> Job:
        with self._calling():
            return _job(self._client.batches.retrieve(job_id))

    def answers(self, job: Job) -> Iterator[Answer]:
        for file_id in (job.output_file, job.error_file):
            if file_id:
                with self._calling():
                    content = self._client.files.content(file_id).content
                for line in content.decode().splitlines():
                    if line.strip():
                        yield _answer(json.loads(line))

    def cancel(self, job_id: str) -> Job:
        with self._calling():
            return _job(self._client.batches.cancel(job_id))

    def close(self) -> None:
        self._client.close()

    def _line(self, request: Request) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "input": request.texts, "encoding_format": "base64"}
        if self._dimensions is not None:
            body["dimensions"] = self._dimensions
        return {"custom_id": request.custom_id, "method": "POST", "url": "/v1/embeddings", "body": body}

    def _calling(self) -> AbstractContextManager[None]:
        return _translated(self.model, self._endpoint)


@contextmanager
def _translated(model: str, endpoint: str) -> Iterator[None]:
    """openai's exceptions as the error tree's, naming the model and the endpoint, never the key."""
    import openai

    try:
        yield
    except openai.OpenAIError as exc:
        raise translate_error(exc, model=model, endpoint=endpoint, api_key=None) from exc


def _job(batch: Any) -> Job:
    counts = batch.request_counts
    errors = getattr(batch.errors, "data", None) or []
    return Job(
        id=batch.id,
        status=batch.status,
        total=counts.total if counts else 0,
        completed=counts.completed if counts else 0,
        failed=counts.failed if counts else 0,
        output_file=batch.output_file_id,
        error_file=batch.error_file_id,
        errors=tuple(f"{e.code}: {e.message}" for e in errors),
    )


def _answer(line: dict[str, Any]) -> Answer:
    custom_id = str(line.get("custom_id", ""))
    response = line.get("response") or {}
    body = response.get("body") or {}
    if response.get("status_code") == 200 and isinstance(body.get("data"), list):
        data = sorted(body["data"], key=lambda item: item.get("index", 0))
        usage = body.get("usage") or {}
        tokens = usage.get("prompt_tokens")
        return Answer(
            custom_id, [decode_vector(item["embedding"]) for item in data], tokens if isinstance(tokens, int) else 0
        )
    error = line.get("error") or body.get("error") or {}
    code, message = error.get("code") or response.get("status_code"), error.get("message") or "no message"
    return Answer(custom_id, None, error=f"{code}: {message}")
