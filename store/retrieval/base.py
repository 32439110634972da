"""The rerank and chat seams: one call each, with the failover chain above them.

A ``Reranker`` scores passages against a query (0 to 1, one score per passage,
in order); a ``Chat`` model answers a conversation with a JSON object that
follows a schema. Both map their driver's failures onto the error tree as the
embedding providers do (TransientError, PermanentError, InputError); an answer
of the wrong shape (a score missing, JSON that does not parse) is a
PermanentError, so the chain fails over. ``providers.fake`` is the reference.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

__all__ = ["Chat", "Message", "Reranker"]

#: One chat message: {"role": "system" | "user" | "assistant", "content": "..."}.
Message = Mapping[str, str]


class Reranker(Protocol):
    """One rerank model at one endpoint."""

    name: str
    model: str
    endpoint: str

    def scores(self, query: str, passages: Sequence[str]) -> list[float]:
        """How well each passage answers ``query``, from 0 to 1, in the passages' order."""
        ...


class Chat(Protocol):
    """One chat model at one endpoint, asked for structured output."""

    name: str
    model: str
    endpoint: str

    def complete(self, messages: Sequence[Message], *, schema: Mapping[str, Any], schema_name: str) -> dict[str, Any]:
        """The model's reply as a JSON object following ``schema``."""
        ...
