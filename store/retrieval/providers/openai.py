"""OpenAI-compatible chat: grounded answers, and reranking by a chat model that scores every passage in one call.

Structured output is asked as a JSON schema (``response_format`` of type
``json_schema``, strict). An endpoint that refuses schemas (a 400 naming
``response_format`` or ``json_schema``) is asked again in JSON mode, with the
schema spelled out in the system message, and remembered: later calls to that
endpoint go straight to JSON mode. The client's own retries are off.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from store.calls import accounting
from store.calls.tokens import estimate_tokens
from store.embeddings.providers.openai import DEFAULT_OPENAI_URL, make_client, translate_error
from store.errors import PermanentError
from store.settings import ModelSettings
from store.settings.urls import redact_url

__all__ = ["SCORES_SCHEMA", "OpenAIChat", "OpenAIReranker"]

#: Endpoints that refused JSON schemas: they get JSON mode.
_JSON_MODE_ONLY: set[str] = set()
_lock = threading.Lock()

SCORES_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "scores": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"passage": {"type": "integer"}, "score": {"type": "number"}},
                "required": ["passage", "score"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["scores"],
    "additionalProperties": False,
}
RERANK_SYSTEM = (
    "You rate how well each numbered passage answers the query, from 0 (not at all) to 1 (fully). "
    "Rate every passage, once, by its number. Reply with a JSON object that follows this schema: {schema}"
)


class OpenAIChat:
    """A chat model behind an OpenAI-compatible ``/chat/completions``."""

    def __init__(self, *, name: str, settings: ModelSettings, client: Any = None, task: str = "chat") -> None:
        self.name, self.model, self.task = name, settings.model, task
        self.endpoint = redact_url(settings.base_url or DEFAULT_OPENAI_URL)
        self._client = client if client is not None else make_client(name=name, settings=settings)

    def __repr__(self) -> str:
        return f"<OpenAIChat {self.name!r} {self.model!r} at {self.endpoint}>"

    def complete(
        self, messages: Sequence[Mapping[str, str]], *, schema: Mapping[str, Any], schema_name: str
    ) -> dict[str, Any]:
        """The reply as a JSON object; PermanentError when it is not one (the chain fails over)."""
        import openai

        with _lock:
            schemas = self.endpoint not in _JSON_MODE_ONLY
        try:
            response = self._create(messages, schema, schema_name, schemas=schemas)
        except openai.BadRequestError as exc:
            if not (schemas and _refuses_schemas(exc)):
                raise self._translate(exc) from exc
            with _lock:
                _JSON_MODE_ONLY.add(self.endpoint)
            try:
                response = self._create(messages, schema, schema_name, schemas=False)
            except openai.OpenAIError as again:
                raise self._translate(again) from again
        except openai.OpenAIError as exc:
            raise self._translate(exc) from exc
        return self._parse(response, messages)

    def close(self) -> None:
        self._client.close()

    def _create(
        self, messages: Sequence[Mapping[str, str]], schema: Mapping[str, Any], schema_name: str, *, schemas: bool
    ) -> Any:
        if schemas:
            response_format: dict[str, Any] = {
                "type": "json_schema",
                "json_schema": {"name": schema_name, "schema": dict(schema), "strict": True},
            }
        else:
            response_format = {"type": "json_object"}
        return self._client.chat.completions.create(
            model=self.model,
            messages=[dict(m) for m in messages],
            response_format=response_format,
            temperature=0,
        )

    def _parse(self, response: Any, messages: Sequence[Mapping[str, str]]) -> dict[str, Any]:
        spent = getattr(getattr(response, "usage", None), "total_tokens", None)
        accounting.record(self.task, self.model, tokens=spent or sum(estimate_tokens(m["content"]) for m in messages))
        where = f"model {self.model!r} at {self.endpoint}"
        try:
            content = response.choices[0].message.content or ""
            data = json.loads(content)
        except (IndexError, AttributeError, ValueError) as exc:
            raise PermanentError(f"{where} answered with text that is not JSON") from exc
        if not isinstance(data, dict):
            raise PermanentError(f"{where} answered {type(data).__name__} JSON, not an object")
        return data

    def _translate(self, exc: Exception) -> Exception:
        return translate_error(
            exc, model=self.model, endpoint=self.endpoint, api_key=getattr(self._client, "api_key", None)
        )


def _refuses_schemas(exc: Any) -> bool:
    text = str(getattr(exc, "message", "") or exc).lower()
    return "response_format" in text or "json_schema" in text


class OpenAIReranker:
    """Reranks with a chat model: all passages scored in one structured call."""

    def __init__(self, *, name: str, settings: ModelSettings, client: Any = None) -> None:
        self._chat = OpenAIChat(name=name, settings=settings, client=client, task="rerank")
        self.name, self.model, self.endpoint = name, settings.model, self._chat.endpoint

    def scores(self, query: str, passages: Sequence[str]) -> list[float]:
        numbered = "\n\n".join(f"[{number}]\n{text}" for number, text in enumerate(passages, 1))
        messages = [
            {"role": "system", "content": RERANK_SYSTEM.format(schema=json.dumps(SCORES_SCHEMA))},
            {"role": "user", "content": f"Query: {query}\n\nPassages:\n\n{numbered}"},
        ]
        reply = self._chat.complete(messages, schema=SCORES_SCHEMA, schema_name="passage_scores")
        return _scores(reply, len(passages), where=f"model {self.model!r} at {self.endpoint}")

    def close(self) -> None:
        self._chat.close()


def _scores(reply: Mapping[str, Any], count: int, *, where: str) -> list[float]:
    """One score per passage from ``{"scores": [{"passage", "score"}]}``; anything else is the model's failure."""
    try:
        found = {int(item["passage"]): float(item["score"]) for item in reply["scores"]}
    except (KeyError, TypeError, ValueError) as exc:
        raise PermanentError(f"{where} answered scores in an unusable shape") from exc
    if sorted(found) != list(range(1, count + 1)) or len(reply["scores"]) != count:
        raise PermanentError(f"{where} scored passages {sorted(found)[:20]} of {count}: every passage once")
    return [min(max(found[number], 0.0), 1.0) for number in range(1, count + 1)]
