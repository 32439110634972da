"""store/retrieval/matches.py: Matches, the list search and rerank return, which refuses ``await`` naming the
async twin of the call that made it."""

from __future__ import annotations

import asyncio

import pytest

from store.retrieval.matches import Matches
from store.vectors.records import VectorMatch

FOUND = [VectorMatch("a", 0.9, "alpha", {}), VectorMatch("b", 0.5, "beta", {})]


def test_matches_are_the_list_of_what_was_found() -> None:
    matches = Matches(FOUND, called="rerank")
    assert isinstance(matches, list) and matches == FOUND and [m.id for m in matches[:1]] == ["a"]
    assert Matches() == [] and Matches().unknown_fields == () and matches.unknown_fields == ()
    assert Matches(called="search", unknown_fields=("owner_id",)).unknown_fields == ("owner_id",)


@pytest.mark.parametrize("called", ["search", "rerank"])
def test_awaiting_matches_names_the_async_twin_of_the_call(called: str) -> None:
    async def misuse() -> None:
        await Matches(FOUND, called=called)

    with pytest.raises(TypeError, match=rf"^{called}\(\) is synchronous: use `await a{called}\(\.\.\.\)`"):
        asyncio.run(misuse())
