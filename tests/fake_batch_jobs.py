"""One batch of the fake OpenAI server's Batch API (``tests/fake_batches.py`` serves them): its input file checked
as OpenAI checks it, its status read off the clock, and the lines of its output and error files.

A batch of ``seconds`` validates for the first tenth of them, runs its lines one after another until nine tenths
(``request_counts`` grow as it goes), finalizes, and completes at ``seconds``. ``BatchScript`` bends that: slower,
invalid, some lines failed, expired or stalled part way (a stalled batch waits for a cancel).
"""

from __future__ import annotations

import json
import math
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

from tests.fake_bodies import cl100k_tokens

__all__ = ["UNFINISHED", "BatchScript", "Job", "batch_error", "check_input", "inputs_of", "result_line"]

#: The only completion window OpenAI offers, in seconds: when a batch that never ends expires.
WINDOW = 24 * 3600
#: Validation ends, and finalizing starts, at these fractions of a batch's seconds.
VALIDATED, FINALIZING = 0.1, 0.9
#: The statuses of a batch that has not ended: its tokens count against the queued-token cap.
UNFINISHED = frozenset({"validating", "in_progress", "finalizing", "cancelling"})


@dataclass(frozen=True, kw_only=True)
class BatchScript:
    """How one batch goes (``push_batch``): how long it takes, and what fails, if anything."""

    #: Seconds it takes in all (None: the server's ``batch_seconds``): a slow batch.
    seconds: float | None = None
    #: Fail validation with this message (code ``invalid_request``): a file OpenAI will not run.
    invalid: str | None = None
    #: Answer the lines of these custom_ids with ``fail_status`` (they go to the error file).
    failing: frozenset[str] = frozenset()
    #: Answer every Nth line (the Nth, the 2Nth...) with ``fail_status``.
    fail_every: int = 0
    fail_status: int = 500
    #: Expire at its end with this fraction of its lines done (the first ones); the rest are ``batch_expired``.
    expire_after: float | None = None
    #: Stop with this fraction of its lines done and wait there, until cancelled (or its 24 hours are up).
    stall_after: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "failing", frozenset(self.failing))  # a list or set given, or read back from JSON

    def fails(self, index: int, custom_id: str) -> bool:
        """Whether the line at ``index`` (from 0) is scripted to fail."""
        return custom_id in self.failing or (self.fail_every > 0 and (index + 1) % self.fail_every == 0)

    @property
    def stop(self) -> float:
        """The fraction of its lines it runs before it stops (all, unless it expires or stalls)."""
        return min(f for f in (self.expire_after, self.stall_after, 1.0) if f is not None)


@dataclass(kw_only=True)
class Job:
    """One batch as the server keeps it (a JSON file in its state_dir): what it was asked, when, how it ended."""

    id: str
    #: Its place in creation order (``batches.list`` answers the newest first).
    seq: int
    input_file_id: str
    endpoint: str
    completion_window: str
    metadata: dict[str, str] | None
    created_at: float
    seconds: float
    script: BatchScript
    #: Its requests' model and cl100k_base tokens (what the queued-token cap counts), and each line's status.
    model: str = ""
    tokens: int = 0
    statuses: list[int] = field(default_factory=list)
    #: The validation errors that fail it (``errors.data``); empty when it runs.
    errors: list[dict[str, Any]] = field(default_factory=list)
    cancelling_at: float | None = None
    cancel_seconds: float = 0.0
    #: Set once it ended: its files, and what it served (lines answered 200, their tokens and texts).
    ended: bool = False
    output_file_id: str | None = None
    error_file_id: str | None = None
    served_lines: int = 0
    served_tokens: int = 0
    embedded: list[str] = field(default_factory=list)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Job:
        return cls(**{**data, "script": BatchScript(**data["script"])})

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "script": {**asdict(self.script), "failing": sorted(self.script.failing)}}

    def at(self, fraction: float) -> float:
        """The time ``fraction`` of its seconds after it was created."""
        return self.created_at + fraction * self.seconds

    @property
    def expiry(self) -> float:
        """When it expires: at its end when scripted to, else when its completion window closes."""
        return self.at(1) if self.script.expire_after is not None else self.created_at + WINDOW

    def status(self, now: float) -> str:
        """Its status at ``now``, read off its clock."""
        validated = now >= self.at(VALIDATED)
        if self.errors:
            return "failed" if validated else "validating"
        if self.cancelling_at is not None:
            return "cancelled" if now >= self.cancelling_at + self.cancel_seconds else "cancelling"
        if not validated:
            return "validating"
        if now >= self.expiry:
            return "expired"
        if self.script.stop < 1 or now < self.at(FINALIZING):
            return "in_progress"
        return "finalizing" if now < self.at(1) else "completed"

    def done(self, now: float) -> int:
        """How many of its lines (the first ones) it ran by ``now``: none while validating, no more once cancelled."""
        until = now if self.cancelling_at is None else min(now, self.cancelling_at)
        start, end = self.at(VALIDATED), self.at(FINALIZING)
        progress = 1.0 if until >= end else 0.0 if until <= start else (until - start) / (end - start)
        return 0 if self.errors else math.floor(len(self.statuses) * min(progress, self.script.stop) + 1e-9)

    def counts(self, now: float) -> dict[str, int]:
        """``request_counts`` at ``now``: the lines run so far, answered 200 or not."""
        ran = self.statuses[: self.done(now)]
        failed = sum(status != 200 for status in ran)
        return {"total": len(self.statuses), "completed": len(ran) - failed, "failed": failed}

    def as_object(self, now: float) -> dict[str, Any]:
        """The batch object the API answers at ``now``."""
        status = self.status(now)
        return {
            "id": self.id,
            "object": "batch",
            "endpoint": self.endpoint,
            "model": self.model or None,
            "errors": {"object": "list", "data": self.errors} if self.errors else None,
            "input_file_id": self.input_file_id,
            "completion_window": self.completion_window,
            "status": status,
            "output_file_id": self.output_file_id,
            "error_file_id": self.error_file_id,
            "created_at": int(self.created_at),
            **self._stamps(status),
            "expires_at": int(self.created_at + WINDOW),
            "request_counts": self.counts(now),
            "metadata": self.metadata,
        }

    def _stamps(self, status: str) -> dict[str, int | None]:
        began = self.at(VALIDATED)
        ran = status not in ("validating", "failed") and (self.cancelling_at or math.inf) >= began
        stamps = {
            "in_progress_at": began if ran else None,
            "finalizing_at": self.at(FINALIZING) if status in ("finalizing", "completed") else None,
            "completed_at": self.at(1) if status == "completed" else None,
            "failed_at": began if status == "failed" else None,
            "expired_at": self.expiry if status == "expired" else None,
            "cancelling_at": self.cancelling_at,
            "cancelled_at": (self.cancelling_at or 0) + self.cancel_seconds if status == "cancelled" else None,
        }
        return {name: None if at is None else int(at) for name, at in stamps.items()}

    def split(self, results: list[dict[str, Any]], now: float) -> tuple[list[Any], list[Any], list[dict[str, Any]]]:
        """The lines of its output file and of its error file once it ended at ``now``, and the results it served.

        Lines it ran go to the output file (answered 200) or the error file; those it never ran go to the error
        file as ``batch_expired`` or ``batch_cancelled``. Both files list lines last first, as OpenAI keeps no
        order: a client matches them by custom_id.
        """
        status, done = self.status(now), self.done(now)
        served = [r for r in results[:done] if r["line"]["response"]["status_code"] == 200]
        failed = [r["line"] for r in results[:done] if r["line"]["response"]["status_code"] != 200]
        message = f"This line was not executed because the batch was {status}."
        error = {"code": f"batch_{status}", "message": message}
        skipped = [{**r["line"], "response": None, "error": error} for r in results[done:]]
        return [r["line"] for r in served][::-1], (failed + skipped)[::-1], served


def batch_error(code: str, message: str, *, line: int | None = None, param: str | None = None) -> dict[str, Any]:
    """One entry of a failed batch's ``errors.data``."""
    return {"code": code, "message": message, "param": param, "line": line}


def inputs_of(body: dict[str, Any]) -> list[str]:
    """The texts an embeddings request body asks for."""
    value = body.get("input", [])
    return [value] if isinstance(value, str) else list(value)


def result_line(custom_id: str, status: int, body: dict[str, Any]) -> dict[str, Any]:
    """A line of a batch's output (or error) file: what the endpoint answered one request."""
    response = {"status_code": status, "request_id": f"req_{uuid.uuid4().hex}", "body": body}
    return {"id": f"batch_req_{uuid.uuid4().hex}", "custom_id": custom_id, "response": response, "error": None}


def check_input(content: bytes, endpoint: str, max_lines: int, max_bytes: int) -> tuple[list[Any], list[Any], int]:
    """An input file's requests, the errors that fail its batch at validation (none: it runs), and its tokens."""
    if len(content) > max_bytes:
        return [], [batch_error("file_too_large", f"The file has {len(content)} bytes, over {max_bytes}.")], 0
    numbered = [(n, line) for n, line in enumerate(content.decode(errors="replace").splitlines(), 1) if line.strip()]
    if not numbered:
        return [], [batch_error("empty_file", "The input file is empty.")], 0
    if len(numbered) > max_lines:
        message = f"The file has {len(numbered)} requests, over the limit of {max_lines}."
        return [], [batch_error("too_many_tasks", message)], 0
    requests: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    seen: set[str] = set()
    for number, line in numbered:
        request, error = _request(line, endpoint)
        if error is None and request["custom_id"] in seen:
            error = batch_error("duplicate_custom_id", "The custom_id is used by another line.", param="custom_id")
        if error is not None:
            errors.append({**error, "line": number})
        else:
            requests.append(request)
            seen.add(request["custom_id"])
    if not errors and len({r["body"]["model"] for r in requests}) > 1:
        errors.append(batch_error("model_mismatch", "Every request of a batch must use the same model."))
    return requests, errors, sum(cl100k_tokens(text) for r in requests for text in inputs_of(r["body"]))


def _request(line: str, endpoint: str) -> tuple[Any, dict[str, Any] | None]:
    """One line's request, or the error that makes it invalid."""
    try:
        request = json.loads(line)
    except ValueError:
        request = None
    if not isinstance(request, dict):
        return None, batch_error("invalid_json_line", "This line is not parseable as valid JSON.")
    body = request.get("body")
    fields = {name: request.get(name) for name in ("custom_id", "method", "url", "body")}
    fields |= {f"body.{name}": body.get(name) for name in ("model", "input")} if isinstance(body, dict) else {}
    missing = next((name for name, value in fields.items() if value is None), None)
    if missing is not None:
        return None, batch_error(
            "missing_required_parameter", f"Missing required parameter: '{missing}'.", param=missing
        )
    if not isinstance(body, dict):
        return None, batch_error("invalid_request", "body must be a JSON object.", param="body")
    if not isinstance(request["custom_id"], str):
        return None, batch_error("invalid_request", "custom_id must be a string.", param="custom_id")
    if request["method"] != "POST":
        return None, batch_error("invalid_request", "The batch API runs POST requests only.", param="method")
    if request["url"] != endpoint:
        message = f"The url {request['url']!r} does not match the batch's endpoint {endpoint!r}."
        return None, batch_error("url_mismatch", message, param="url")
    texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
    if not texts or not all(isinstance(text, str) and text for text in texts):
        return None, batch_error("invalid_request", "input must be a text or a list of texts.", param="body.input")
    return request, None
