"""The provider seam: one method that embeds one batch, and the helpers every provider shares.

A provider turns a list of texts into a list of vectors in one call, and maps
its driver's failures onto the error tree: ``TransientError`` (429, 5xx,
timeouts, connection errors; ``retry_after`` when the server said so),
``PermanentError`` (401, 403, 404) and ``InputError`` (400, 413, 422). Retries,
failover, batching and checking the vectors are done once, above the providers
(``failover``, ``batching``); what an HTTP answer's status stands for is ``store.calls.http``.
``providers.fake`` is the reference.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from store.settings import ModelSettings, default
from store.settings.section import FromSection

__all__ = ["DEFAULT_LIMITS", "Limits", "Provider", "Vectors"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Limits(FromSection):
    """How much one provider call may carry: inputs, estimated tokens per call and per input."""

    max_inputs: int = default(ModelSettings, "max_inputs")
    max_tokens_per_request: int = default(ModelSettings, "max_tokens_per_request")
    max_tokens_per_input: int = default(ModelSettings, "max_tokens_per_input")

    def tightest(self, other: Limits) -> Limits:
        """The limits that satisfy both ``self`` and ``other``."""
        return Limits(
            max_inputs=min(self.max_inputs, other.max_inputs),
            max_tokens_per_request=min(self.max_tokens_per_request, other.max_tokens_per_request),
            max_tokens_per_input=min(self.max_tokens_per_input, other.max_tokens_per_input),
        )


#: The limits of OpenAI's embeddings endpoint, the defaults of ``ModelSettings``.
DEFAULT_LIMITS = Limits()


class Vectors(list[list[float]]):
    """What ``embed_batch`` may return instead of a plain list: the vectors, and the tokens the provider counted
    for the call (OpenAI's ``usage``, a local model's tokenizer). A plain list, or ``tokens`` None, leaves the
    count to the chain (``store.calls.tokens.token_counter``). A value per call, so parallel calls never mix."""

    __slots__ = ("tokens",)

    def __init__(self, vectors: Iterable[list[float]] = (), *, tokens: int | None = None) -> None:
        super().__init__(vectors)
        self.tokens = tokens


class Provider(Protocol):
    """One embedding model at one endpoint."""

    #: The ``[models.NAME]`` this provider was built from.
    name: str
    #: The model's name as the API knows it; recorded with every vector it makes.
    model: str
    dimensions: int
    limits: Limits
    #: Where the model is served, for messages: a URL without credentials, or "local".
    endpoint: str

    def embed_batch(self, texts: list[str]) -> list[list[float]]:
        """One vector per text, in order, in one call; a ``Vectors`` when the provider counts the call's tokens.

        Raises TransientError (with ``retry_after`` when the server sent one),
        PermanentError, InputError; messages name the model and the endpoint,
        never a key.
        """
        ...
