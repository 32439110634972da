"""``vectorsync doctor``: check each part the settings name, one line each, with the fix when one is broken.

Parts, in order: the broker, the state database, the vector store (with
pgvector's version: 0.8 or later for iterative scans), the embedding cache,
each embedding model of the chain (one real embed of a short text, its size
checked), each rerank and chat model of ``[retrieval]`` (one real call), the
change capture of each collection that asks for it (installed, pending
changes, lag), the workers (how many answer, which queues each consumes) and Flower when
``[flower] url`` is set. A broken *required* part (``fail``)
makes the command exit 1; an optional one (the cache, a failover model,
Flower) is a ``warn``. A part that answers but whose place no settings file or
``VECTORSYNC_*`` variable set (a Redis that happens to run at the default
broker URL, the ``fake`` model) is a ``default``, not an ``ok``.
"""

from __future__ import annotations

import functools
import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer
from rich.text import Text

from producer.cli.console import open_producer, out
from producer.cli.safe_text import printable
from producer.cli.unset import all_unset, unset
from store.broker.queues import consumers_of
from store.contract import QUEUES, REDIS_SCHEMES, WORKER_COMMAND

if TYPE_CHECKING:
    from store.settings import Settings

__all__ = ["Check", "checks", "defaulted", "doctor", "render", "retrieval_checks", "to_json"]

Status = Literal["ok", "default", "warn", "fail"]
#: The pgvector release that brought iterative index scans, which filtered search needs.
MIN_PGVECTOR = (0, 8)
#: Seconds a database connection attempt may take before the part counts as down.
CONNECT_SECONDS = "5"
PROBE_TEXT = "vectorsync doctor"


def doctor(as_json: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False) -> None:
    """Check every part the settings name, one line each, with the fix; exit 1 when a required part is broken."""
    producer = open_producer()
    found = []
    for check in checks(producer.settings, producer):
        found.append(check)
        if not as_json:
            render(check)
    if as_json:
        print(to_json(found))
    if any(check.status == "fail" for check in found):
        raise typer.Exit(1)


@dataclass(frozen=True)
class Check:
    """One part: its status, how long the check took, what was found, and the fix when it is broken."""

    part: str
    status: Status
    millis: float
    detail: str
    fix: str = ""


class _Broken(Exception):
    def __init__(self, detail: str, fix: str, status: Status = "fail") -> None:
        super().__init__(detail)
        self.detail, self.fix, self.status = detail, fix, status


def _timed(part: str, probe: Callable[[], str], *, fix: str, status: Status = "fail") -> Check:
    """Run ``probe``; its return value is the detail, any exception a broken part with ``fix``."""
    start = time.perf_counter()
    try:
        detail = probe()
    except _Broken as broken:
        return Check(part, broken.status, _ms(start), broken.detail, broken.fix)
    except Exception as exc:
        return Check(part, status, _ms(start), f"{type(exc).__name__}: {exc}".splitlines()[0][:300], fix)
    return Check(part, "ok", _ms(start), detail)


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 1)


def defaulted(check: Check, keys: tuple[str, ...]) -> Check:
    """``check`` said to rest on defaults when every one of ``keys`` is unset: ``default`` instead of ``ok``."""
    if not keys:
        return check
    note = f" (default: {' and '.join(keys)} not set in any settings file or VECTORSYNC_* variable)"
    return replace(check, status="default" if check.status == "ok" else check.status, detail=check.detail + note)


def checks(settings: Settings, producer: Any) -> Iterator[Check]:
    """Every check, in order; each one runs when the previous has been reported."""
    os.environ.setdefault("PGCONNECT_TIMEOUT", CONNECT_SECONDS)  # libpq: a dead host fails fast
    broker = _timed(
        "broker",
        lambda: _broker(settings, producer),
        fix="start the broker, or fix broker.url (VECTORSYNC_BROKER__URL)",
    )
    yield defaulted(broker, unset(settings, "broker.url"))
    yield defaulted(
        _timed(
            "state database",
            lambda: _state(producer),
            fix="start PostgreSQL, or fix state.url (VECTORSYNC_STATE__URL; default: vectors.url)",
        ),
        all_unset(settings, "state.url", "vectors.url"),
    )
    yield defaulted(
        _timed(
            f"vector store ({settings.vectors.store})",
            lambda: _store(settings),
            fix="start it, or fix vectors.url (VECTORSYNC_VECTORS__URL)",
        ),
        all_unset(settings, "vectors.store", "vectors.url"),
    )
    cache = _cache(settings)
    if cache is not None:
        yield defaulted(cache, all_unset(settings, "cache.url", "broker.url"))
    yield from _models(settings)
    yield from retrieval_checks(settings)
    yield from _capture(settings)
    if broker.status != "fail":
        yield _timed("workers", lambda: _workers(producer), fix=f"start one: {WORKER_COMMAND}")
    else:
        yield Check("workers", "fail", 0.0, "not asked: the broker is down", "fix the broker first")
    if settings.flower.url:
        url = settings.flower.url
        yield _timed(
            "flower",
            lambda: _flower(url),
            status="warn",
            fix="start Flower (python -m worker.runtime.flower), or fix flower.url (VECTORSYNC_FLOWER__URL)",
        )


def _capture(settings: Settings) -> Iterator[Check]:
    """Each captured collection: its triggers installed, its outbox's pending rows and lag; orphan rows warned."""
    from store.capture import captured

    if not captured(settings):
        return
    from store.capture.control import report

    start = time.perf_counter()
    try:
        states = report(settings)
    except Exception as exc:
        yield Check(
            "capture",
            "fail",
            _ms(start),
            f"{type(exc).__name__}: {exc}".splitlines()[0][:300],
            "start the source database, or fix collections.NAME.source.url",
        )
        return
    for state in states:
        lag = "" if state.lag_seconds is None else f", oldest {state.lag_seconds:.1f} s"
        detail = f"{state.pending} pending{lag}"
        problem = state.problem
        if problem is None:
            yield Check(f"capture {state.collection}", "ok", _ms(start), f"installed, {detail}")
        else:
            yield Check(
                f"capture {state.collection}", "warn" if not state.declared else "fail", _ms(start), detail, problem
            )


def _broker(settings: Settings, producer: Any) -> str:
    """Connect through the producer's Celery app, as the workers do (``celery_config``: the transport, TLS and
    Sentinel options of the URL's form), and say how the broker hands tasks over; a warning where a task may
    be lost."""
    from store.transport.handover import handover
    from store.transport.kombu_names import SUPPORTED, UnsupportedKombu

    try:
        said = handover(settings.broker.url)
    except UnsupportedKombu as exc:
        raise _Broken(str(exc).split(" (", 1)[0], f"pip install 'kombu[redis]{SUPPORTED}'") from None
    with producer.app.connection_for_write(connect_timeout=3) as conn:
        conn.ensure_connection(max_retries=1, timeout=3)
    if not said.safe:
        raise _Broken(said.summary, "use a Redis or RabbitMQ broker", status="warn")
    return said.summary


def _state(producer: Any) -> str:
    from store.errors import SchemaTooNew

    try:
        producer.ledger.recent_runs(1)
    except SchemaTooNew as exc:
        raise _Broken(str(exc), "upgrade vectorsync in this environment to the workers' version") from None
    return getattr(producer.ledger, "safe_url", "reachable")


def _store(settings: Settings) -> str:
    from store.vectors.backends import open_store

    with open_store(settings) as store:
        names = store.list_collections()
        detail = f"{len(names)} collections"
        if settings.vectors.store == "pgvector":
            version = _pgvector_version(store)
            if tuple(int(part) for part in version.split(".")[:2]) < MIN_PGVECTOR:
                raise _Broken(
                    f"pgvector {version}: filtered search needs iterative index scans (0.8)",
                    "upgrade the extension: ALTER EXTENSION vector UPDATE (pgvector 0.8 or later)",
                )
            detail = f"pgvector {version}, {detail}"
    return f"{detail} at {without_credentials(settings.vectors.url or 'memory')}"


def without_credentials(url: str) -> str:
    """``url`` as a message may show it (``store.settings.urls``, imported here: it loads the settings)."""
    from store.settings.urls import without_credentials as shown

    return shown(url)


def _pgvector_version(store: Any) -> str:
    import sqlalchemy as sa

    with store.transaction() as conn:
        found = conn.execute(sa.text("SELECT extversion FROM pg_extension WHERE extname = 'vector'")).scalar()
    return str(found)


def _cache(settings: Settings) -> Check | None:
    if settings.embeddings.cache_ttl_days <= 0:
        return None
    url = settings.cache_url
    if not url.startswith(REDIS_SCHEMES):
        return Check(
            "cache",
            "warn",
            0.0,
            f"{without_credentials(url)} is not a Redis: no embedding cache",
            "set [cache] url to a Redis, or embeddings.cache_ttl_days = 0",
        )

    def ping() -> str:
        from store.connect.redis import redis_client

        client = redis_client(url, timeout=2)
        try:
            client.ping()
        finally:
            client.close()
        return without_credentials(url)

    return _timed(
        "cache",
        ping,
        status="warn",
        fix="start Redis or fix cache.url; indexing goes on without a cache, paying for every text again",
    )


def _models(settings: Settings) -> Iterator[Check]:
    from store.embeddings.chain import DEFAULT_ENTRY, resolve_entries
    from store.embeddings.providers import build_provider

    for position, (name, model) in enumerate(resolve_entries(settings)):

        def probe(name: str = name, model: Any = model) -> str:
            provider = build_provider(name, model)
            try:
                [vector] = provider.embed_batch([PROBE_TEXT])
            finally:
                close = getattr(provider, "close", None)
                if close is not None:
                    close()
            if len(vector) != settings.vectors.dimensions:
                raise _Broken(
                    f"{model.model} returned {len(vector)} dimensions; vectors.dimensions is "
                    f"{settings.vectors.dimensions}",
                    f"set models.{name}.dimensions and vectors.dimensions to the model's size",
                )
            return f"{model.provider} {model.model}, {len(vector)} dimensions, at {provider.endpoint}"

        required: Status = "fail" if position == 0 else "warn"
        check = _timed(
            f"model {name}",
            probe,
            status=required,
            fix=f"check models.{name} (base_url, api_key_env, model) and that the endpoint is up",
        )
        yield defaulted(check, all_unset(settings, "embeddings.chain", "models") if name == DEFAULT_ENTRY else ())


def retrieval_checks(settings: Settings) -> Iterator[Check]:
    """One real call of each configured rerank and chat model."""
    from store.retrieval.providers import build_chat, build_reranker

    def rerank(name: str, model: Any) -> str:
        scores = build_reranker(name, model).scores(PROBE_TEXT, ["a passage about vectorsync", "an unrelated one"])
        if len(scores) != 2:
            raise _Broken(f"{model.model} returned {len(scores)} scores for 2 passages", "check the model")
        return f"{model.provider} {model.model}, rerank"

    def chat(name: str, model: Any) -> str:
        schema = {
            "type": "object",
            "properties": {"ok": {"type": "boolean"}},
            "required": ["ok"],
            "additionalProperties": False,
        }
        build_chat(name, model).complete(
            [{"role": "user", "content": 'Reply with the JSON object {"ok": true}.'}],
            schema=schema,
            schema_name="doctor",
        )
        return f"{model.provider} {model.model}, chat"

    probes: list[tuple[str, list[str], Callable[[str, Any], str]]] = [
        ("rerank", settings.retrieval.rerank, rerank),
        ("chat", settings.retrieval.answer, chat),
    ]
    for task, names, probe in probes:
        for position, name in enumerate(names):
            if name not in settings.models:
                continue
            status: Status = "fail" if position == 0 else "warn"
            yield _timed(
                f"{task} model {name}",
                functools.partial(probe, name, settings.models[name]),
                status=status,
                fix=f"check models.{name} (base_url, api_key_env, model) and that the endpoint is up",
            )


def _workers(producer: Any) -> str:
    workers = producer.workers(timeout=1.0, active=False)
    if not workers:
        raise _Broken("no worker answers a ping", f"start one: {WORKER_COMMAND}")
    missing = [queue for queue in QUEUES if not consumers_of(queue, workers)]
    listing = "; ".join(f"{w.name}: {','.join(w.queues) or '-'}" for w in workers)
    if missing:
        raise _Broken(
            f"{len(workers)} answer ({listing}) but none consumes {', '.join(missing)}",
            f"start one that does: {WORKER_COMMAND}",
        )
    return f"{len(workers)} answer ({listing})"


def _flower(url: str) -> str:
    import urllib.request  # here, not at the top: every vectorsync command imports this module

    with urllib.request.urlopen(f"{url.rstrip('/')}/healthcheck", timeout=3) as response:
        if response.status != 200:
            raise _Broken(f"{without_credentials(url)} answered {response.status}", "check Flower's log", status="warn")
    return without_credentials(url)


_MARKS = {"ok": ("ok", "green"), "default": ("dflt", "cyan"), "warn": ("warn", "yellow"), "fail": ("FAIL", "red")}


def render(check: Check) -> None:
    """One line: status, part, latency, what was found; the fix on the same line when broken."""
    mark, colour = _MARKS[check.status]
    line = Text(f"{mark:<4}", style=colour)
    line.append(f" {check.part:<24} {check.millis:>7.0f} ms  {printable(check.detail)}")
    if check.fix:
        line.append(f" → fix: {printable(check.fix)}")
    out.print(line)


def to_json(found: list[Check]) -> str:
    """Every check and whether none failed, as JSON."""
    return json.dumps(
        {"ok": not any(c.status == "fail" for c in found), "checks": [asdict(c) for c in found]}, indent=2
    )
