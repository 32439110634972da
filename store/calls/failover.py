"""Failover across model entries: each tried with tenacity retries, the next one when it fails for good.

Shared by the embedding chain and the rerank and chat chains. Per entry only
``TransientError`` is retried (exponential backoff with full jitter, at least
the server's ``Retry-After``, at most ``max_wait_seconds`` between tries,
``max_attempts`` tries); a server that asks for a longer pause than
``max_wait_seconds`` is not retried sooner: that entry cools down for as long
as it asked and the next one is tried. ``PermanentError`` moves on to the next entry at
once; ``InputError`` and ``ConfigError`` are raised at once. An entry that ran
out of tries or failed permanently cools down for ``cooldown_seconds``: calls
skip it meanwhile. When every entry fails, the error raised is transient if
any entry failed transiently (worth retrying later), else the last permanent
one; when every entry is cooling down, a TransientError whose ``retry_after``
is the time until the first comes back.

Each try of an entry with a shared rate limit (``store.calls.ratelimit``) first
waits for its budget: one request and the call's estimated tokens. A 429
shrinks that budget for every process, besides the backoff above.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt, stop_any
from tenacity.stop import stop_base
from tenacity.wait import wait_random_exponential

from store.calls.accounting import EmbeddingStats, observe_try
from store.calls.ratelimit import Limiter
from store.errors import ConfigError, PermanentError, ProviderError, TransientError
from store.settings import EmbeddingSettings, ModelSettings, Settings, default
from store.settings.section import FromSection

__all__ = ["BACKOFF_MULTIPLIER", "DEFAULT_POLICY", "TASKS", "ChainPolicy", "Entry", "Failover", "named_entries"]

log = logging.getLogger(__name__)

#: The first backoff step in seconds; each retry may wait up to twice as long (full jitter).
BACKOFF_MULTIPLIER = 0.5
#: The metrics' ``task`` label of a chain, by what it calls (``store.calls.accounting`` counts calls the same way).
TASKS = {"embedding": "embed", "rerank": "rerank", "chat": "chat"}


class Entry(Protocol):
    """What failover needs of a model entry."""

    #: The ``[models.NAME]`` it was built from.
    name: str
    #: The model's name as its API knows it.
    model: str


E = TypeVar("E", bound=Entry)
R = TypeVar("R")


@dataclass(frozen=True, kw_only=True, slots=True)
class ChainPolicy(FromSection):
    """How hard to try each entry, and how long to skip one that keeps failing."""

    max_attempts: int = default(EmbeddingSettings, "max_attempts")
    max_wait_seconds: float = default(EmbeddingSettings, "max_wait_seconds")
    cooldown_seconds: float = default(EmbeddingSettings, "cooldown_seconds")


#: The policy of the default settings.
DEFAULT_POLICY = ChainPolicy()


def _retry_after(state: RetryCallState) -> float | None:
    """The Retry-After (seconds) the last failed try's error carries, if any."""
    error = state.outcome.exception() if state.outcome else None
    return getattr(error, "retry_after", None)


def _wait_for(policy: ChainPolicy) -> Callable[[RetryCallState], float]:
    """A tenacity wait: full-jitter exponential backoff, at least Retry-After, capped."""
    backoff = wait_random_exponential(multiplier=BACKOFF_MULTIPLIER, max=policy.max_wait_seconds)

    def wait(state: RetryCallState) -> float:
        seconds = backoff(state)
        retry_after = _retry_after(state)
        if retry_after:
            seconds = max(seconds, retry_after)
        return float(min(seconds, policy.max_wait_seconds))

    return wait


def named_entries(
    settings: Settings, names: Sequence[str], *, task: str, setting: str
) -> list[tuple[str, ModelSettings]]:
    """The ``[models.NAME]`` sections ``names`` lists, in order; each must exist once and serve ``task``."""
    unknown = [name for name in names if name not in settings.models]
    if unknown:
        known = ", ".join(repr(name) for name in settings.models) or "none"
        raise ConfigError(
            f"{setting} names {unknown[0]!r}, which is not a [models.{unknown[0]}] section (configured: {known})"
        )
    if len(set(names)) != len(names):
        raise ConfigError(f"{setting} names a model twice: {list(names)}")
    wrong = [name for name in names if settings.models[name].task != task]
    if wrong:
        raise ConfigError(
            f"{setting} names {wrong[0]!r}, whose task is {settings.models[wrong[0]].task!r}: list models with "
            f'task = "{task}" there'
        )
    return [(name, settings.models[name]) for name in names]


class _AsksTooLongAWait(stop_base):
    """A tenacity stop: the last error's Retry-After is longer than the policy's ``max_wait_seconds``."""

    def __init__(self, policy: ChainPolicy) -> None:
        self.policy = policy

    def __call__(self, state: RetryCallState) -> bool:
        retry_after = _retry_after(state)
        return bool(retry_after and retry_after > self.policy.max_wait_seconds)


class Failover(Generic[E]):
    """Runs a call with the first entry that works; see the module docstring. Thread-safe."""

    def __init__(
        self,
        entries: Sequence[E],
        *,
        policy: ChainPolicy = DEFAULT_POLICY,
        stats: EmbeddingStats | None = None,
        what: str = "embedding",
        setting: str = "embeddings.chain",
        limiters: Mapping[str, Limiter] | None = None,
    ):
        if not entries:
            raise ConfigError(f"the {what} chain is empty: name at least one [models.NAME] in {setting}")
        self.entries = list(entries)
        self.policy = policy
        self.stats = stats if stats is not None else EmbeddingStats()
        self.what = what
        #: The ``task`` label of its metrics: embed, rerank or chat.
        self.task = TASKS.get(what, what)
        #: Shared rate limits by entry name (``ratelimit.rate_limiters``); an entry without one is unlimited.
        self.limiters = dict(limiters or {})
        self._cool_until: dict[str, float] = {}
        self._lock = threading.Lock()

    def run(self, call: Callable[[E], R], *, tokens: int = 0) -> tuple[R, E]:
        """``call(entry)`` with retries, failing over; the result and the entry that made it.

        ``tokens`` is the call's estimated tokens, taken from a rate-limited entry's budget with each try.
        Raises InputError and ConfigError at once; TransientError or PermanentError when every entry failed.
        """
        failures: list[ProviderError] = []
        for entry in self.entries:
            if self._cooling(entry):
                continue
            try:
                return self._with_retries(entry, call, tokens), entry
            except (TransientError, PermanentError) as error:
                self._cool_down(entry, at_least=getattr(error, "retry_after", None) or 0.0)
                self.stats.add("failovers", entry.name)
                log.warning("%s model %r failed, trying the next one: %s", self.what, entry.name, error)
                failures.append(error)
        raise self._all_failed(failures)

    def _with_retries(self, entry: E, call: Callable[[E], R], tokens: int) -> R:
        retrying = Retrying(
            retry=retry_if_exception_type(TransientError),
            # A server asking for a longer pause than max_wait_seconds is not hammered sooner: the entry
            # cools down for as long as it asked, and the next entry is tried.
            stop=stop_any(stop_after_attempt(self.policy.max_attempts), _AsksTooLongAWait(self.policy)),
            wait=_wait_for(self.policy),
            before_sleep=lambda state: self.stats.add("retries", entry.name),
            reraise=True,
        )

        limiter = self.limiters.get(entry.name)

        def counted() -> R:
            if limiter is not None:
                limiter.acquire(tokens=tokens)
            self.stats.add("calls", entry.name)
            started = time.perf_counter()
            try:
                result = call(entry)
            except Exception as error:
                observe_try(self.task, entry.name, time.perf_counter() - started, error)
                if limiter is not None and isinstance(error, TransientError) and error.rate_limited:
                    limiter.penalize(error.retry_after)
                raise
            observe_try(self.task, entry.name, time.perf_counter() - started)
            return result

        result: R = retrying(counted)
        return result

    def _cooling(self, entry: E) -> bool:
        with self._lock:
            return self._cool_until.get(entry.name, 0.0) > time.monotonic()

    def _cool_down(self, entry: E, *, at_least: float = 0.0) -> None:
        seconds = max(self.policy.cooldown_seconds, at_least)
        if seconds > 0:
            with self._lock:
                self._cool_until[entry.name] = time.monotonic() + seconds

    def _all_failed(self, failures: list[ProviderError]) -> ProviderError:
        transient = [error for error in failures if isinstance(error, TransientError)]
        if transient:
            return transient[-1]
        if failures:
            return failures[-1]
        with self._lock:
            wait = max(min(self._cool_until.values()) - time.monotonic(), 0.0)
        names = ", ".join(repr(entry.name) for entry in self.entries)
        return TransientError(
            f"every {self.what} model ({names}) is cooling down after failures; the next is tried again in {wait:.1f}s",
            retry_after=wait,
        )
