"""The fake reranker and chat model: no network, deterministic, the test doubles and the first-try default.

``FakeReranker`` keeps the search order (scores fall from 1 in steps) and
calls nothing. ``FakeChat`` answers from a script that tests fill with
``reply``; with nothing scripted it answers with the first passage it was
shown, citing it, and says it cannot answer when it was shown none. Every
conversation it was given is kept in ``prompts``.
"""

from __future__ import annotations

import re
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["FAKE_MODEL", "FakeChat", "FakeReranker"]

#: The model name of the fake reranker and chat model.
FAKE_MODEL = "fake"

_PASSAGE = re.compile(r"^\[(\d+)\][^\n]*\n(.+?)(?=\n\n\[\d+\]|\Z)", re.M | re.S)


class FakeReranker:
    """Keeps the order it is given."""

    endpoint = "local"

    def __init__(self, *, name: str = FAKE_MODEL, model: str = FAKE_MODEL) -> None:
        self.name, self.model = name, model

    def scores(self, query: str, passages: Sequence[str]) -> list[float]:
        return [1.0 - index / (len(passages) + 1) for index in range(len(passages))]


class FakeChat:
    """Scripted answers; see the module docstring."""

    endpoint = "local"

    def __init__(self, *, name: str = FAKE_MODEL, model: str = FAKE_MODEL) -> None:
        self.name, self.model = name, model
        self.prompts: list[list[dict[str, str]]] = []
        self._script: deque[dict[str, Any]] = deque()
        self._lock = threading.Lock()

    def reply(self, answer: dict[str, Any]) -> None:
        """Queue the next reply (a JSON object)."""
        with self._lock:
            self._script.append(dict(answer))

    def complete(
        self, messages: Sequence[Mapping[str, str]], *, schema: Mapping[str, Any], schema_name: str
    ) -> dict[str, Any]:
        with self._lock:
            self.prompts.append([dict(m) for m in messages])
            if self._script:
                return self._script.popleft()
        shown = _PASSAGE.findall(messages[-1]["content"]) if messages else []
        if not shown:
            return {"answer": "The passages do not say.", "sources": [], "answered": False}
        number, text = shown[0]
        return {"answer": " ".join(text.split())[:300], "sources": [int(number)], "answered": True}
