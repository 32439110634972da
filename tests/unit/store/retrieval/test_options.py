"""The option sets of search and answer: every function that takes one refuses a keyword outside it as Python
refuses one a plain signature lacks, and passes each option through (their defaults: ``test_search.py``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

import store.query as query
from store import Client
from store.retrieval import Retrieval
from store.retrieval.options import AnswerOptions, SearchOptions, refuse_unknown
from store.settings import Settings
from store.vectors.backends import memory_store

SETTINGS = Settings.model_validate({"vectors": {"store": "memory", "dimensions": 4}})
STORE = memory_store(dimensions=4)
STORE.get_collection("notes", create=True)
CLIENT = Client(SETTINGS, store=STORE)
RETRIEVAL = Retrieval.from_settings(SETTINGS, store=STORE)
VECTOR = [1.0, 0.0, 0.0, 0.0]

#: Each function that takes an option set, named as Python names it in a TypeError, called with ``extra``.
CALLS: dict[str, Callable[..., Any]] = {
    "search": lambda **extra: query.search("notes", VECTOR, store=STORE, **extra),
    "asearch": lambda **extra: query.asearch("notes", VECTOR, store=STORE, **extra),
    "answer": lambda **extra: query.answer("notes", "why?", retrieval=RETRIEVAL, **extra),
    "aanswer": lambda **extra: query.aanswer("notes", "why?", retrieval=RETRIEVAL, **extra),
    "Client.search": lambda **extra: CLIENT.search("notes", VECTOR, **extra),
    "Client.asearch": lambda **extra: CLIENT.asearch("notes", VECTOR, **extra),
    "Client.answer": lambda **extra: CLIENT.answer("notes", "why?", **extra),
    "Retrieval.answer": lambda **extra: RETRIEVAL.answer("notes", "why?", **extra),
}


def test_refuse_unknown_names_the_call_and_the_first_unknown_keyword() -> None:
    refuse_unknown("search", {"limit": 3}, SearchOptions.__optional_keys__)
    with pytest.raises(TypeError, match=r"^search\(\) got an unexpected keyword argument 'limt'$"):
        refuse_unknown("search", {"limit": 3, "limt": 3}, SearchOptions.__optional_keys__)


@pytest.mark.parametrize("name", CALLS)
def test_a_keyword_outside_the_option_set_is_the_type_error_of_a_plain_signature(name: str) -> None:
    """Raised at the call, the async twins included (not when the result is awaited), as before the options
    were a TypedDict; ``store`` and ``retrieval`` belong to store.query's functions alone."""
    with pytest.raises(TypeError, match=rf"^{name}\(\) got an unexpected keyword argument 'limt'$"):
        CALLS[name](limt=3)
    if name.startswith("Client.") or name.startswith("Retrieval."):
        with pytest.raises(TypeError, match=rf"^{name}\(\) got an unexpected keyword argument 'store'$"):
            CALLS[name](store=STORE)


def test_the_option_sets_are_the_documented_keywords() -> None:
    assert SearchOptions.__optional_keys__ == {"filter", "limit", "min_score", "mode"}
    assert AnswerOptions.__optional_keys__ == {"filter", "candidates", "top", "user", "allow", "mode"}


class _Retrieval:
    """A retrieval that records the options of its answer."""

    def __init__(self) -> None:
        self.seen: dict[str, Any] = {}

    def answer(self, collection: str, question: str, **options: Any) -> str:
        self.seen = options
        return "answered"


def test_every_answer_option_reaches_retrieval_through_the_query_functions_and_their_twin() -> None:
    options: AnswerOptions = {"filter": {"a": 1}, "candidates": 5, "top": 2, "user": "u", "allow": list, "mode": None}
    fake = _Retrieval()
    assert query.answer("notes", "why?", retrieval=fake, **options) == "answered"
    assert fake.seen == options
    fake.seen = {}
    assert asyncio.run(query.aanswer("notes", "why?", retrieval=fake, **options)) == "answered"
    assert fake.seen == options
