"""A local server speaking OpenAI's ``POST /v1/embeddings`` and ``/v1/chat/completions``, Ollama's
``/api/embed``, and the ``/rerank`` API of Cohere, Jina, vLLM and TEI.

Vectors come from the fake provider's word hashing, so they mean something (the bodies it answers:
``tests/fake_bodies.py``). Rerank scores are word overlap with the query. Chat answers come from
``reply_chat`` (a JSON object the "model" answers), else: scores for a rerank
prompt, and for an answer prompt the first passage, cited as [1].
``refuse_schemas`` makes it answer 400 to JSON-schema output, as servers
without structured output do.
Embeddings come back as base64 (little-endian float32) when the request asks
``encoding_format: "base64"``, as JSON floats otherwise; ``refuse_base64``
makes it answer 400 to base64, as strict servers do, and a ``floats`` reply
ignores the format, as lax ones do. ``dense`` sets every coordinate, as real
models do (hashed words alone leave most of them 0.0, which flatters JSON).
``usage`` is OpenAI's: ``prompt_tokens`` = ``total_tokens`` = the inputs' cl100k_base tokens, and
``served_tokens``, ``served_calls`` and ``served_texts`` add up what the embeddings answers (status 200) counted;
``served`` counts each text they embedded (a text bought twice counts 2).
Every request is recorded with when it arrived (``arrivals``; ``busiest``
counts them per sliding window, as a provider's rate limit does). Scripted
replies (``push``) make it fail on command: a status with headers, a delay
past the client's timeout, vectors of the wrong size or one vector too few.
``always`` sets the reply once the script is used up.
It also serves OpenAI's Files and Batch API for embeddings (``tests/fake_batches.py``: its settings, scripts and
accounting), each batch line answered as ``/v1/embeddings`` answers it (``line_answer``).
Use it as a context manager: ``with FakeOpenAI() as server: ...``; it loads
its tokenizer before it starts, so no answer waits for that.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter, deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Unpack

from store.embeddings.providers.fake import hash_embed
from store.settings import Settings
from tests.fake_batches import BatchAPI, BatchSettings
from tests.fake_bodies import cl100k, cl100k_tokens, default_chat, dense_embed, error_body, ok_body, rerank_body

__all__ = ["FAST_RETRIES", "FakeOpenAI", "Reply", "Request", "cl100k_tokens", "settings_for"]

#: Retry settings that keep tests fast: three tries, waits of at most 50 ms.
FAST_RETRIES = {"max_attempts": 3, "max_wait_seconds": 0.05, "cooldown_seconds": 60}


@dataclass(frozen=True, kw_only=True)
class Reply:
    """One scripted answer: an error status, or a success that may be slow or malformed."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    #: Seconds to sleep before answering (past the client's timeout: a timeout).
    delay: float = 0.0
    #: Answer with vectors of this size instead of the requested one.
    dimensions: int | None = None
    #: Leave this many vectors out of the answer.
    drop: int = 0
    #: Answer vectors full of NaN (a broken model).
    nan: bool = False
    #: Answer JSON floats whatever ``encoding_format`` asked (a server that ignores it).
    floats: bool = False
    message: str = "scripted failure"


@dataclass(frozen=True)
class Request:
    """One request the server received."""

    path: str
    body: dict[str, Any]
    #: The authorization header the client sent ("" when none).
    authorization: str = ""
    #: When it arrived (time.monotonic()).
    at: float = field(default_factory=time.monotonic)

    @property
    def inputs(self) -> list[str]:
        value = self.body.get("input", [])
        return [value] if isinstance(value, str) else list(value)

    @property
    def encoding_format(self) -> str | None:
        """The ``encoding_format`` the request asked for (None when it asked none)."""
        return self.body.get("encoding_format")


class FakeOpenAI(BatchAPI):
    """The server; ``url`` is the OpenAI base URL (``.../v1``), ``root`` the bare host. ``port`` 0 takes a free one
    (another server's, to restart it there); the batch keywords (``state_dir``...): ``BatchAPI``."""

    def __init__(
        self,
        *,
        dimensions: int = 8,
        refuse_base64: bool = False,
        dense: bool = False,
        host: str = "127.0.0.1",
        port: int = 0,
        **batches: Unpack[BatchSettings],
    ) -> None:
        super().__init__(**batches)
        self.dimensions = dimensions
        #: The address it listens on (another than loopback for a client in a network namespace).
        self.host = host
        #: Vectors from ``dense_embed`` instead of ``hash_embed``.
        self.dense = dense
        #: Answer 400 to ``encoding_format: "base64"`` (a server that speaks JSON floats only).
        self.refuse_base64 = refuse_base64
        #: Bytes of every response body sent, and the seconds spent building and serialising them.
        self.sent_bytes = 0
        self.serve_seconds = 0.0
        #: Tokens (cl100k_base, as ``usage`` reported them) and calls of every embeddings answer with status 200.
        self.served_tokens = 0
        self.served_calls = 0
        #: Texts every embeddings answer with status 200 embedded, and how often each one was.
        self.served_texts = 0
        self.served: Counter[str] = Counter()
        self.requests: list[Request] = []
        self.script: deque[Reply] = deque()
        self.default = Reply()
        #: Refuse (400) every request with an input containing this text: a record the provider rejects.
        self.reject_containing: str | None = None
        #: JSON objects the chat endpoint answers, in order, before its default behaviour.
        self.chat_script: deque[dict[str, Any] | str] = deque()
        #: Answer 400 to ``response_format`` of type ``json_schema`` (JSON mode still works).
        self.refuse_schemas = False
        #: The most requests ever being answered at once.
        self.max_in_flight = 0
        self._in_flight = 0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer((host, port), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)

    @property
    def root(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"{self.root}/v1"

    @property
    def calls(self) -> int:
        """How many requests arrived."""
        with self._lock:
            return len(self.requests)

    def arrivals(self, path: str = "/v1/embeddings") -> list[float]:
        """When each request to ``path`` arrived (time.monotonic()), in order."""
        with self._lock:
            return sorted(request.at for request in self.requests if request.path == path)

    def busiest(self, seconds: float, path: str = "/v1/embeddings") -> int:
        """The most requests to ``path`` that arrived within any ``seconds``: a sliding-window count."""
        times, most, start = self.arrivals(path), 0, 0
        for end, at in enumerate(times):
            while at - times[start] > seconds:
                start += 1
            most = max(most, end - start + 1)
        return most

    def push(self, **reply: Any) -> None:
        """Queue one scripted reply (``Reply``'s fields); used before the default."""
        self.script.append(Reply(**reply))

    def always(self, **reply: Any) -> None:
        """Answer every request past the script with this reply."""
        self.default = Reply(**reply)

    def reply_chat(self, answer: dict[str, Any] | str) -> None:
        """Queue what the chat model answers next: a JSON object, or raw text (e.g. not JSON)."""
        self.chat_script.append(answer)

    def chat_prompts(self) -> list[str]:
        """The user message of every chat request so far."""
        return [r.body["messages"][-1]["content"] for r in self.requests if r.path.endswith("/chat/completions")]

    def start(self) -> FakeOpenAI:
        # Every embeddings answer counts its tokens with cl100k_base, whose first load takes seconds on a busy
        # machine (bpe-openai builds its encodings on import): loaded now, the first answer is not that late.
        cl100k()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @contextmanager
    def tracking(self) -> Iterator[None]:
        """Count a request in flight while the block runs."""
        with self._lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
        try:
            yield
        finally:
            with self._lock:
                self._in_flight -= 1

    def answer(
        self, path: str, body: dict[str, Any], authorization: str = ""
    ) -> tuple[int, dict[str, str], dict[str, Any], float]:
        """Record the request and decide the reply: (status, headers, body, delay)."""
        request = Request(path, body, authorization)
        refused = self._refusal(request)
        with self._lock:
            self.requests.append(request)
            reply = refused or (self.script.popleft() if self.script else self.default)
        reply = refused or self._rejection(request, reply)
        if reply.status != 200:
            return reply.status, reply.headers, error_body(path, reply.status, reply.message), reply.delay
        if path.endswith("/chat/completions"):
            return self._chat(body, reply)
        if path.endswith("/rerank"):
            return 200, reply.headers, rerank_body(body, reply.drop), reply.delay
        payload, tokens = self.embedding(request, reply)
        with self._lock:
            self.served_tokens += tokens
            self.served_calls += 1
            self.served_texts += len(request.inputs)
            self.served.update(request.inputs)
        return 200, reply.headers, payload, reply.delay

    def embedding(self, request: Request, reply: Reply) -> tuple[dict[str, Any], int]:
        """The embeddings answer to ``request``, shaped by ``reply``, and its tokens (cl100k_base)."""
        size = reply.dimensions or request.body.get("dimensions") or self.dimensions
        embed = dense_embed if self.dense else hash_embed
        vectors = [[float("nan")] * size if reply.nan else embed(text, size) for text in request.inputs]
        vectors = vectors[: len(vectors) - reply.drop]
        encoding = None if reply.floats else request.encoding_format
        tokens = sum(cl100k_tokens(text) for text in request.inputs)
        return ok_body(request.path, request.body.get("model", ""), vectors, encoding, tokens), tokens

    def line_answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """What ``POST /v1/embeddings`` answers ``body`` past the script (refusals included): a batch line's answer."""
        request = Request("/v1/embeddings", body)
        reply = self._refusal(request) or self._rejection(request, Reply())
        if reply.status != 200:
            return reply.status, error_body(request.path, reply.status, reply.message)
        return 200, self.embedding(request, reply)[0]

    def _rejection(self, request: Request, reply: Reply) -> Reply:
        """The 400 for an input containing ``reject_containing`` (with ``reply``'s delay), else ``reply``."""
        if self.reject_containing and any(self.reject_containing in text for text in request.inputs):
            return Reply(status=400, message=f"input contains {self.reject_containing!r}", delay=reply.delay)
        return reply

    def _refusal(self, request: Request) -> Reply | None:
        """The 400 a float-only server answers to base64 (it leaves the script alone), else None."""
        if self.refuse_base64 and request.path == "/v1/embeddings" and request.encoding_format == "base64":
            return Reply(status=400, message="encoding_format 'base64' is not supported: use 'float'")
        return None

    def count_sent(self, size: int, seconds: float) -> None:
        """Add one response body's size to ``sent_bytes`` and the time it took to ``serve_seconds``."""
        with self._lock:
            self.sent_bytes += size
            self.serve_seconds += seconds

    def _chat(self, body: dict[str, Any], reply: Reply) -> tuple[int, dict[str, str], dict[str, Any], float]:
        kind = (body.get("response_format") or {}).get("type")
        if kind == "json_schema" and self.refuse_schemas:
            error = Reply(status=400, message="response_format json_schema is not supported by this server")
            return 400, {}, error_body("/v1/chat/completions", error.status, error.message), reply.delay
        with self._lock:
            scripted = self.chat_script.popleft() if self.chat_script else None
        content = (
            scripted
            if isinstance(scripted, str)
            else json.dumps(scripted if scripted is not None else default_chat(body["messages"][-1]["content"]))
        )
        return (
            200,
            reply.headers,
            {
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model", ""),
                "choices": [
                    {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            },
            reply.delay,
        )


def _handler_for(server: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._batch_api("GET")

        def do_DELETE(self) -> None:
            self._batch_api("DELETE")

        def _batch_api(self, method: str) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            status, kind, data = server.serve_batch_api(method, self.path, self.headers.get("Content-Type", ""), raw)
            self._send(status, {}, data, kind)

        def do_POST(self) -> None:
            path = self.path.split("?")[0]
            if path.startswith(("/v1/files", "/v1/batches")):
                self._batch_api("POST")
                return
            if path not in (
                "/v1/embeddings",
                "/api/embed",
                "/v1/chat/completions",
                "/rerank",
                "/v1/rerank",
                "/v2/rerank",
            ):
                self._send(404, {}, {"error": {"message": f"no route {path}"}})
                return
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            with server.tracking():
                started = time.perf_counter()
                status, headers, payload, delay = server.answer(path, body, self.headers.get("Authorization", ""))
                data = json.dumps(payload).encode()
                server.count_sent(len(data), time.perf_counter() - started)
                if delay:
                    time.sleep(delay)
            self._send(status, headers, data)

        def _send(self, status: int, headers: dict[str, str], payload: Any, kind: str = "application/json") -> None:
            data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


def settings_for(
    *servers: FakeOpenAI,
    dimensions: int = 8,
    models: list[str] | None = None,
    model: dict[str, Any] | None = None,
    cache_url: str = "redis://127.0.0.1:1/0",
    **embeddings: Any,
) -> Settings:
    """Settings with one ``openai`` entry per server (``m0``, ``m1``...) in chain order.

    ``models`` names each entry's model (default: one shared name); ``model`` adds
    fields to every ``[models.NAME]``; ``embeddings`` overrides ``[embeddings]``
    (cache off and fast retries unless given).
    """
    names = models or ["text-embedding-test"] * len(servers)
    entries = {
        f"m{i}": {
            "provider": "openai",
            "model": names[i],
            "dimensions": dimensions,
            "base_url": server.url,
            "timeout": 10.0,  # a loaded CI machine answers late; the timeout tests set their own
            **(model or {}),
        }
        for i, server in enumerate(servers)
    }
    section = {"chain": list(entries), "cache_ttl_days": 0, **FAST_RETRIES, **embeddings}
    return Settings.model_validate(
        {
            "models": entries,
            "embeddings": section,
            "vectors": {"store": "memory", "dimensions": dimensions},
            "cache": {"url": cache_url},
        }
    )
