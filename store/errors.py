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
module that talks to the driver and raised ``from`` the original.
"""

from __future__ import annotations

__all__ = [
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
]


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
