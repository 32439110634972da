"""OpenAI's Files and Batch API for embeddings, as the fake OpenAI server (``tests/fake_openai.py``) serves it.

A client uploads a JSON Lines file (``POST /v1/files``, purpose ``batch``), creates a batch of it
(``POST /v1/batches``), polls it (``GET /v1/batches/{id}``, ``GET /v1/batches?limit=&after=``), may cancel it
(``POST /v1/batches/{id}/cancel``), and downloads its output and error files (``GET /v1/files/{id}/content``).
Each line is answered as ``POST /v1/embeddings`` answers the same body, so its vectors are the synchronous ones.

A batch moves by the server's clock (``batch_seconds``), not by the requests that poll it: one batch is
``tests/fake_batch_jobs.py``. Everything (files, batches, their clocks) lives in ``state_dir``, so a server started
on the state_dir of a stopped one carries on its batches, which went on running while it was down, as OpenAI's do.
Scripts (``push_batch``) make a batch slow, invalid, partly failed, expired or stalled; ``queued_token_limit`` fails
a batch with ``token_limit_exceeded`` as OpenAI's cap on a model's enqueued tokens does. ``batch_served_tokens``,
``batch_served_lines`` and ``batch_inputs`` count what batches embedded, once, when each batch ended.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
import uuid
from collections import deque
from email.parser import BytesParser
from email.policy import HTTP
from pathlib import Path
from typing import Any, TypedDict
from urllib.parse import parse_qs, urlsplit

from tests.fake_batch_jobs import UNFINISHED, BatchScript, Job, batch_error, check_input, inputs_of, result_line
from tests.fake_bodies import error_body

__all__ = ["BatchAPI", "BatchScript", "BatchSettings"]

#: The endpoint the fake runs batches of.
ENDPOINT = "/v1/embeddings"


class BatchSettings(TypedDict, total=False):
    """``FakeOpenAI``'s batch keywords: ``BatchAPI.__init__`` says what each is."""

    state_dir: str | Path | None
    batch_seconds: float
    cancel_seconds: float
    queued_token_limit: int | None
    max_batch_lines: int
    max_batch_bytes: int


class Refused(Exception):
    """An API request answered with an error status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class BatchAPI:
    """The Files and Batch API with their state in ``state_dir``; ``FakeOpenAI`` is one, and answers its lines."""

    def __init__(
        self,
        state_dir: str | Path | None = None,
        *,
        batch_seconds: float = 0.2,
        cancel_seconds: float = 0.05,
        queued_token_limit: int | None = None,
        max_batch_lines: int = 50_000,
        max_batch_bytes: int = 200_000_000,
    ) -> None:
        if state_dir is None:  # a directory of its own, removed with it
            self._scratch = tempfile.TemporaryDirectory(prefix="fake-openai-")
            state_dir = self._scratch.name
        #: Where files and batches are kept: a server started on a stopped one's state_dir carries on its batches.
        self.state_dir = Path(state_dir)
        #: How long a batch takes in all (validating, in_progress, finalizing), unless its script says.
        self.batch_seconds = batch_seconds
        #: How long a cancelled batch stays ``cancelling``.
        self.cancel_seconds = cancel_seconds
        #: A model's enqueued-token cap: a batch whose tokens, with those of the model's unfinished batches,
        #: exceed it fails validation with ``token_limit_exceeded`` (None: no cap).
        self.queued_token_limit = queued_token_limit
        #: OpenAI's limits on one input file: its requests, and its size.
        self.max_batch_lines = max_batch_lines
        self.max_batch_bytes = max_batch_bytes
        self.batch_script: deque[BatchScript] = deque()
        self.batch_default = BatchScript()
        #: (method, path) of every Files and Batch API request, in order.
        self.batch_api_calls: list[tuple[str, str]] = []
        self._batch_lock = threading.RLock()
        for folder in ("files", "batches"):
            (self.state_dir / folder).mkdir(parents=True, exist_ok=True)
        self._files = {p.stem: json.loads(p.read_text()) for p in (self.state_dir / "files").glob("*.json")}
        self._jobs = {p.stem: Job.from_json(json.loads(p.read_text())) for p in self._batches.glob("*.json")}

    def line_answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """What ``POST /v1/embeddings`` answers ``body``: its status and body (``FakeOpenAI`` says)."""
        raise NotImplementedError

    def push_batch(self, **script: Any) -> None:
        """Queue how the next batch created goes (``BatchScript``'s fields); used before the default."""
        self.batch_script.append(BatchScript(**script))

    def always_batch(self, **script: Any) -> None:
        """Run every batch past the script so."""
        self.batch_default = BatchScript(**script)

    @property
    def batch_served_tokens(self) -> int:
        """The cl100k_base tokens of every line batches answered 200, counted once, when its batch ended."""
        return sum(job.served_tokens for job in self._ended())

    @property
    def batch_served_lines(self) -> int:
        """The lines batches answered 200, counted once, when their batch ended."""
        return sum(job.served_lines for job in self._ended())

    def batch_inputs(self) -> list[list[str]]:
        """The texts each ended batch embedded (its lines answered 200), one list per batch that passed validation,
        oldest first: a text in two lists was bought twice."""
        return [job.embedded for job in self._ended() if not job.errors]

    def serve_batch_api(self, method: str, target: str, content_type: str, raw: bytes) -> tuple[int, str, bytes]:
        """Answer one Files or Batch API request: its status, content type and body."""
        url = urlsplit(target)
        query = {name: values[-1] for name, values in parse_qs(url.query).items()}
        with self._batch_lock:
            self.batch_api_calls.append((method, url.path))
            now = time.time()  # one time for the whole answer: a batch it shows ended has its files
            self._advance(now)
            try:
                status, answer = 200, self._route(method, url.path, query, (content_type, raw), now)
            except Refused as refused:
                error = {"message": str(refused), "type": "invalid_request_error", "param": None, "code": None}
                status, answer = refused.status, {"error": error}
        if isinstance(answer, bytes):
            return status, "application/octet-stream", answer
        return status, "application/json", json.dumps(answer).encode()

    def _route(self, method: str, path: str, query: dict[str, str], body: tuple[str, bytes], now: float) -> Any:
        content_type, raw = body
        match [method, *path.removeprefix("/v1/").strip("/").split("/")]:
            case ["POST", "files"]:
                return self._upload(content_type, raw)
            case ["GET", "files", file_id]:
                return self._file(file_id)
            case ["GET", "files", file_id, "content"]:
                return self._content(file_id)
            case ["DELETE", "files", file_id]:
                return self._delete(file_id)
            case ["POST", "batches"]:
                return self._create(json.loads(raw or b"{}"), now)
            case ["GET", "batches"]:
                return self._list(query, now)
            case ["GET", "batches", batch_id]:
                return self._job(batch_id).as_object(now)
            case ["POST", "batches", batch_id, "cancel"]:
                return self._cancel(batch_id, now)
        raise Refused(404, f"no route {method} {path}")

    @property
    def _batches(self) -> Path:
        return self.state_dir / "batches"

    def _upload(self, content_type: str, raw: bytes) -> dict[str, Any]:
        form = _form(content_type, raw)
        if "file" not in form or "purpose" not in form:
            raise Refused(400, "Missing required parameter: 'file' and 'purpose' are required.")
        filename, data = form["file"]
        return self._keep(data, filename or "upload.jsonl", form["purpose"][1].decode().strip())

    def _keep(self, data: bytes, filename: str, purpose: str) -> dict[str, Any]:
        """Store a file (uploaded, or a batch's output) and answer its file object."""
        file_id = f"file-{uuid.uuid4().hex[:24]}"
        meta = {"id": file_id, "object": "file", "bytes": len(data), "created_at": int(time.time())}
        meta |= {"filename": filename, "purpose": purpose, "status": "processed"}
        _write(self.state_dir / "files" / f"{file_id}.data", data)
        _write(self.state_dir / "files" / f"{file_id}.json", json.dumps(meta).encode())
        self._files[file_id] = meta
        return meta

    def _file(self, file_id: str) -> dict[str, Any]:
        if file_id not in self._files:
            raise Refused(404, f"No such File object: {file_id}")
        return dict(self._files[file_id])

    def _content(self, file_id: str) -> bytes:
        if self._file(file_id)["purpose"] == "batch":
            raise Refused(400, "Not allowed to download files of purpose: batch")
        return (self.state_dir / "files" / f"{file_id}.data").read_bytes()

    def _delete(self, file_id: str) -> dict[str, Any]:
        self._file(file_id)
        for suffix in (".data", ".json"):
            (self.state_dir / "files" / f"{file_id}{suffix}").unlink()
        del self._files[file_id]
        return {"id": file_id, "object": "file", "deleted": True}

    def _create(self, body: dict[str, Any], now: float) -> dict[str, Any]:
        file = self._file(str(body.get("input_file_id")))
        if file["purpose"] != "batch":
            raise Refused(400, f"The input file {file['id']} has purpose {file['purpose']!r}, not 'batch'.")
        if body.get("endpoint") != ENDPOINT:
            raise Refused(400, f"This fake runs batches of {ENDPOINT} only, not {body.get('endpoint')!r}.")
        if body.get("completion_window") != "24h":
            raise Refused(400, "completion_window must be '24h'.")
        script = self.batch_script.popleft() if self.batch_script else self.batch_default
        content = (self.state_dir / "files" / f"{file['id']}.data").read_bytes()
        requests, errors, tokens = check_input(content, ENDPOINT, self.max_batch_lines, self.max_batch_bytes)
        model = requests[0]["body"]["model"] if requests else ""
        job = Job(
            id=f"batch_{uuid.uuid4().hex[:24]}",
            seq=max((j.seq for j in self._jobs.values()), default=-1) + 1,
            input_file_id=file["id"],
            endpoint=ENDPOINT,
            completion_window="24h",
            metadata=body.get("metadata"),
            created_at=now,
            seconds=self.batch_seconds if script.seconds is None else script.seconds,
            script=script,
            model=model,
            tokens=tokens,
            errors=[batch_error("invalid_request", script.invalid)] if script.invalid else errors,
        )
        if not job.errors:
            job.errors = self._over_cap(job, now)
        if not job.errors:
            results = [self._result(i, request, script) for i, request in enumerate(requests)]
            job.statuses = [result["line"]["response"]["status_code"] for result in results]
            _write(self._batches / f"{job.id}.lines.jsonl", "".join(json.dumps(r) + "\n" for r in results).encode())
        self._jobs[job.id] = job
        self._save(job)
        self._advance(now)  # a batch of 0 seconds has ended already
        return job.as_object(now)

    def _over_cap(self, job: Job, now: float) -> list[dict[str, Any]]:
        """``token_limit_exceeded`` when the job's tokens with those of its model's unfinished batches pass the cap."""
        queued = sum(
            j.tokens
            for j in self._jobs.values()
            if j.model == job.model and not j.errors and j.status(now) in UNFINISHED
        )
        if self.queued_token_limit is None or queued + job.tokens <= self.queued_token_limit:
            return []
        message = (
            f"Enqueued token limit reached for {job.model} in organization org-fake. Limit: "
            f"{self.queued_token_limit:,} enqueued tokens. Please try again once some in_progress batches have "
            "been completed."
        )
        return [batch_error("token_limit_exceeded", message)]

    def _result(self, index: int, request: dict[str, Any], script: BatchScript) -> dict[str, Any]:
        """A line's answer, kept until its batch ends (with its texts, for ``batch_inputs``)."""
        if script.fails(index, request["custom_id"]):
            status = script.fail_status
            body = error_body(ENDPOINT, status, "scripted batch line failure")
        else:
            status, body = self.line_answer(request["body"])
        return {"inputs": inputs_of(request["body"]), "line": result_line(request["custom_id"], status, body)}

    def _job(self, batch_id: str) -> Job:
        if batch_id not in self._jobs:
            raise Refused(404, f"No batch found with id '{batch_id}'.")
        return self._jobs[batch_id]

    def _list(self, query: dict[str, str], now: float) -> dict[str, Any]:
        jobs = sorted(self._jobs.values(), key=lambda job: -job.seq)
        if "after" in query:
            jobs = jobs[[job.id for job in jobs].index(self._job(query["after"]).id) + 1 :]
        limit = min(max(int(query.get("limit", 20)), 1), 100)
        page = [job.as_object(now) for job in jobs[:limit]]
        ids = [batch["id"] for batch in page] or [None]
        return {"object": "list", "data": page, "first_id": ids[0], "last_id": ids[-1], "has_more": len(jobs) > limit}

    def _cancel(self, batch_id: str, now: float) -> dict[str, Any]:
        job = self._job(batch_id)
        status = job.status(now)
        if status not in ("validating", "in_progress", "cancelling", "cancelled"):
            raise Refused(409, f"Cannot cancel a batch with status '{status}'.")
        if job.cancelling_at is None:
            job.cancelling_at, job.cancel_seconds = now, self.cancel_seconds
            self._save(job)
            self._advance(now)
        return job.as_object(now)

    def _ended(self) -> list[Job]:
        """The batches that ended, oldest first (ending those whose time has come)."""
        with self._batch_lock:
            self._advance(time.time())
            return sorted((job for job in self._jobs.values() if job.ended), key=lambda job: job.seq)

    def _advance(self, now: float) -> None:
        """End every batch whose clock says it ended: write its output and error files, count what it served."""
        for job in self._jobs.values():
            if job.ended or job.status(now) in UNFINISHED:
                continue
            if not job.errors:
                lines = (self._batches / f"{job.id}.lines.jsonl").read_text().splitlines()
                output, errors, served = job.split([json.loads(line) for line in lines], now)
                job.output_file_id = self._keep_lines(output, f"{job.id}_output.jsonl")
                job.error_file_id = self._keep_lines(errors, f"{job.id}_error.jsonl")
                job.served_lines = len(served)
                job.served_tokens = sum(r["line"]["response"]["body"]["usage"]["prompt_tokens"] for r in served)
                job.embedded = [text for r in served for text in r["inputs"]]
            job.ended = True
            self._save(job)

    def _keep_lines(self, lines: list[Any], filename: str) -> str | None:
        """Store a batch's output or error file (None when it has no lines, as OpenAI leaves it unset)."""
        data = "".join(json.dumps(line) + "\n" for line in lines).encode()
        return self._keep(data, filename, "batch_output")["id"] if lines else None

    def _save(self, job: Job) -> None:
        _write(self._batches / f"{job.id}.json", json.dumps(job.to_json()).encode())


def _form(content_type: str, raw: bytes) -> dict[str, tuple[str | None, bytes]]:
    """A multipart/form-data body's fields: name -> (file name, content)."""
    form = BytesParser(policy=HTTP).parsebytes(f"Content-Type: {content_type}\r\n\r\n".encode() + raw)
    fields = {}
    for part in form.walk() if form.is_multipart() else []:
        data = part.get_payload(decode=True)
        if isinstance(data, bytes):
            fields[str(part.get_param("name", header="content-disposition"))] = (part.get_filename(), data)
    return fields


def _write(path: Path, data: bytes) -> None:
    """Write a file whole or not at all (a server stopped mid-write leaves the old one)."""
    partial = path.with_name(path.name + ".partial")
    partial.write_bytes(data)
    os.replace(partial, path)
