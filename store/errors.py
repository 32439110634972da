"""The one error tree of vectorsync.

    VectorsyncError
    ├── ConfigError          bad settings or bad input: fix the value named in the message
    │   └── SchemaTooNew     the state database or a collection table was upgraded by a newer vectorsync
    ├── StoreError           a backend refused an operation (not worth retrying)
    │   └── StoreUnavailable a backend (PostgreSQL, Qdrant, Redis) could not be reached: retry later
    │       └── BrokerUnavailable  the broker did not take a task
    └── ProviderError        a model call failed: embedding, rerank or chat (also named EmbeddingError)
        ├── TransientError   worth retrying: 429, 5xx, timeouts, connection errors
        ├── PermanentError   this endpoint will not work: 401, 403, 404, an unusable answer; try the next model
        └── InputError       the input itself was refused (400): the record's or the caller's fault

Driver errors (psycopg, qdrant-client, redis, openai) are translated inside the
module that talks to the driver and raised ``from`` the original. A message naming a value a user gave names
it with ``echo``: its repr, its start alone when it is long.
"""

from __future__ import annotations

__all__ = [
    "ECHO_CHARS",
    "BrokerUnavailable",
    "BudgetExceeded",
    "ConfigError",
    "EmbeddingError",
    "InputError",
    "PermanentError",
    "ProviderError",
    "SchemaTooNew",
    "StoreError",
    "StoreUnavailable",
    "TransientError",
    "VectorsyncError",
    "echo",
]

#: Characters of a value a message echoes; a longer one is cut there and its length said.
ECHO_CHARS = 60


def echo(value: object, *, limit: int = ECHO_CHARS) -> str:
    """``value`` as a message names it: its repr (control characters escaped), or for a long one its first
    ``limit`` characters and its length, so a 5,000-character name still makes a one-line error."""
    if isinstance(value, str):
        return repr(value) if len(value) <= limit else f"{value[:limit]!r}… ({len(value):,} characters)"
    shown = repr(value)
    if len(shown) <= limit:
        return shown
    return f"{shown[:limit]}… (a {type(value).__name__} whose repr has {len(shown):,} characters)"


class VectorsyncError(Exception):
    """Base of every error vectorsync raises on purpose."""


class BudgetExceeded(VectorsyncError):
    """The next model call would pass its run's cap: the run pauses, nothing of the batch is written."""


class ConfigError(VectorsyncError, ValueError):
    """A setting or an input value is wrong; the message names it and the fix."""


class SchemaTooNew(ConfigError):
    """The state database or a collection table is at a schema version this vectorsync does not know: a newer
    one upgraded it.

    A worker refuses to start on such a state database, and such a collection is not opened: its writes would
    leave out what the newer schema expects.
    """


class StoreError(VectorsyncError):
    """A backend refused an operation; retrying the same call will not help."""


class StoreUnavailable(StoreError):
    """A backend could not be reached or failed while answering; retrying later may help."""


class BrokerUnavailable(StoreUnavailable):
    """The broker did not take a task: a task that sends one is delivered again rather than lost."""


class ProviderError(VectorsyncError):
    """A model provider call failed (embedding, rerank or chat)."""


#: The first name of ProviderError, from when embeddings were the only model calls; kept for callers.
EmbeddingError = ProviderError


class TransientError(ProviderError):
    """A failure that may go away when retried (429, 5xx, timeout, connection)."""

    def __init__(self, message: str, *, retry_after: float | None = None, rate_limited: bool = False) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        #: The provider said 429, too many requests: the shared rate limit shrinks (``store.calls.ratelimit``).
        self.rate_limited = rate_limited


class PermanentError(ProviderError):
    """The endpoint refuses every call (401, 403, 404): move on to the next model."""


class InputError(ProviderError):
    """The provider refused this input (400): retrying or failing over will not help."""
