"""The ``http`` reranker: the ``/rerank`` API of Cohere, Jina, vLLM (``rerank_api = "cohere"``) or TEI.

Cohere's shape: ``{model, query, documents, top_n}`` answers
``{results: [{index, relevance_score}]}``. TEI's: ``{query, texts,
raw_scores: false}`` answers ``[{index, score}]`` (scores through a sigmoid),
and refuses more than 32 texts a request, so TEI calls go in batches of 32.
``base_url`` is the address ``/rerank`` is appended to (``.../v2`` for Cohere).
httpx's exceptions are translated by ``store.calls.http``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from store.calls import accounting, http
from store.calls.http import post, scrub
from store.calls.tokens import estimate_tokens
from store.errors import ConfigError, PermanentError
from store.settings import ModelSettings
from store.settings.urls import redact_url

__all__ = ["TEI_BATCH", "HttpReranker"]

#: Texts TEI takes per request (its --max-client-batch-size default).
TEI_BATCH = 32


class HttpReranker:
    """One model behind a ``/rerank`` endpoint."""

    def __init__(self, *, name: str, settings: ModelSettings, client: Any = None) -> None:
        if not settings.base_url:
            raise ConfigError(
                f"models.{name} uses provider 'http': set models.{name}.base_url to the server that "
                "serves /rerank (e.g. http://127.0.0.1:8080 for TEI)"
            )
        self.name, self.model, self.api = name, settings.model, settings.rerank_api
        self.endpoint = redact_url(settings.base_url)
        self._key = os.environ.get(settings.api_key_env) if settings.api_key_env else None
        self._client = (
            client
            if client is not None
            else http.client(
                name, "http", (settings.base_url or "").rstrip("/"), timeout=settings.timeout, key=self._key
            )
        )

    def scores(self, query: str, passages: Sequence[str]) -> list[float]:
        if self.api == "tei":
            return [
                score
                for start in range(0, len(passages), TEI_BATCH)
                for score in self._call(query, passages[start : start + TEI_BATCH])
            ]
        return self._call(query, passages)

    def close(self) -> None:
        self._client.close()

    def _call(self, query: str, passages: Sequence[str]) -> list[float]:
        if self.api == "tei":
            body: dict[str, Any] = {"query": query, "texts": list(passages), "raw_scores": False, "truncate": True}
        else:
            body = {"model": self.model, "query": query, "documents": list(passages), "top_n": len(passages)}
        response = post(
            self._client,
            "/rerank",
            body,
            model=self.model,
            endpoint=self.endpoint,
            detail=lambda answer: scrub(answer.text[:300], self._key),
        )
        accounting.record(
            "rerank",
            self.model,
            tokens=estimate_tokens(query) * len(passages) + sum(estimate_tokens(p) for p in passages),
        )
        return self._parse(response, len(passages))

    def _parse(self, response: Any, count: int) -> list[float]:
        where = f"model {self.model!r} at {self.endpoint}"
        try:
            data = response.json()
            items = data if isinstance(data, list) else data["results"]
            found = {int(item["index"]): float(item.get("relevance_score", item.get("score"))) for item in items}
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise PermanentError(f"{where} answered scores in an unusable shape") from exc
        if sorted(found) != list(range(count)) or len(items) != count:
            raise PermanentError(f"{where} scored {len(items)} passages of {count}: every passage once")
        return [min(max(found[index], 0.0), 1.0) for index in range(count)]
