"""What ``vectorsync dev`` prints once it runs: where each part answers, what to try, and the line tests wait for."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from producer.cli.console import out
from producer.cli.dev.banner import SERVING, TRY_DOCS, TRY_QUERY, TRY_UPDATE, serving_banner


def printed(serve: bool, flower_url: str | None) -> str:
    with out.capture() as captured:
        serving_banner(
            config=Path("/tmp/dev dir/vectorsync.toml"),
            redis_url="redis://127.0.0.1:6390/0",
            database_url="postgresql://postgres:@/vectorsync?host=/tmp/pg",
            flower_url=flower_url,
            logs=Path("/tmp/dev dir/logs"),
            serve=serve,
        )
    return captured.get()


def test_serving_says_where_each_part_is_and_what_to_try() -> None:
    text = printed(True, "http://127.0.0.1:5555")
    assert "http://127.0.0.1:5555" in text and "redis://127.0.0.1:6390/0" in text
    assert "VECTORSYNC_CONFIG='/tmp/dev dir/vectorsync.toml'" in text  # quoted for the shell
    assert TRY_UPDATE in text and TRY_QUERY in text
    assert text.rstrip().endswith(SERVING)


def test_without_serving_or_flower_it_says_so() -> None:
    text = printed(False, None)
    assert "--no-serve: stopping now" in text and SERVING not in text
    assert "not running (pip install 'vectorsync[flower]')" in text


def first_hit(provider: Any, texts: list[str], query: str) -> int:
    """The index of the text ``query`` is closest to by cosine, embedded by ``provider`` as a search compares them."""
    import numpy as np

    vectors = np.array(provider.embed_batch(texts), dtype=float)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    asked = np.array(provider.embed_batch([query])[0], dtype=float)
    return int(np.argmax(vectors @ (asked / np.linalg.norm(asked))))


@pytest.mark.parametrize("model", ["fake", "local"])
def test_the_suggested_docs_search_finds_the_topic_it_promises(model: str) -> None:
    """The printout's docs search, over the short help topics as the dev collection chunks them ("{topic}\\n\\n{body}",
    200 tokens) and embeds them with each dev model: its first match is the topic it promises. ("how do I open a
    file" found `numbers` with `fake` and `bltin-type-objects` with `local`: no short topic is about files.)"""
    from producer.cli.dev.config import DIMENSIONS, choose_model
    from producer.cli.dev.corpus import topic_rows
    from store.embeddings.providers import build_provider
    from store.settings import ModelSettings
    from worker.pipeline.chunker import Chunker

    query, filter, promised = TRY_DOCS
    choice = choose_model("auto")
    if model == "local" and choice.provider != "local":
        pytest.skip(f"the local model is not installed: {choice.why}")
    name = choice.model if model == "local" else "fake"
    provider = build_provider(model, ModelSettings(provider=model, model=name, dimensions=DIMENSIONS))
    chunker = Chunker(200, 24)
    chunks = [
        (row["topic"], chunk.text)
        for row in topic_rows()
        if all(row[key] == value for key, value in filter.items())
        for chunk in chunker.chunks(f"{row['topic']}\n\n{row['body']}")
    ]
    best = first_hit(provider, [text for _, text in chunks], query)
    assert chunks[best][0] == promised


#: The printout's searches of the notes (query, filter) and a word of what each promises, in every note it finds first.
TRY_NOTES = [
    ("customer worried about onboarding time", {"kind": "call", "owner": "Dana"}, "onboarding"),
    ("discount", {"created_at": {"$gte": "2026-11-01"}}, "discount"),
    (TRY_QUERY, {}, "Zurich"),  # once the printout's psql UPDATE ran
]


@pytest.mark.parametrize(("query", "where", "promised"), TRY_NOTES, ids=[q for q, _, _ in TRY_NOTES])
def test_the_suggested_note_searches_find_what_they_promise(
    query: str, where: dict[str, object], promised: str
) -> None:
    """The printout's searches of crm_notes, over the sample notes the filter keeps, chunked and embedded as the dev
    system does with the fake model: the note found first says what the search promises (and each is printed)."""
    from producer.cli.dev.config import DIMENSIONS
    from producer.cli.dev.corpus import crm_rows
    from store.embeddings.providers import build_provider
    from store.settings import ModelSettings
    from store.vectors.filters import Filter
    from worker.pipeline.chunker import Chunker

    assert query in printed(True, None)
    provider = build_provider("fake", ModelSettings(provider="fake", model="fake", dimensions=DIMENSIONS))
    keep = Filter.from_dict(where) if where else None
    changed = re.fullmatch(r"UPDATE crm_notes SET body = '(.+)' WHERE id = (\d+)", TRY_UPDATE)
    assert changed is not None
    rows = [{**row, "body": changed[1]} if row["id"] == int(changed[2]) else row for row in crm_rows()]
    chunker = Chunker(128, 16)
    notes = [
        (row["body"], chunk.text)
        for row in rows
        if keep is None or keep.matches({**row, "created_at": row["created_at"].isoformat()})
        for chunk in chunker.chunks(f"{row['title']}\n\n{row['body']}")
    ]
    best = first_hit(provider, [chunk for _, chunk in notes], query)
    assert promised in notes[best][0], notes[best][0]
