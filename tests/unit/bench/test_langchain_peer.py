"""The peer of bench/peer.py is given what vectorsync works from: the same chunks and the same vectors."""

from __future__ import annotations

from pathlib import Path

from bench.langchain_peer import documents, peer_embeddings
from store.embeddings import Embeddings
from store.settings import Settings, load_settings
from tests.crm import expected_chunks, note
from tests.fake_bodies import served_embed
from tests.fake_openai import FakeOpenAI
from tests.settings_files import settings_toml

UNREACHABLE = "redis://127.0.0.1:1/0"


def settings(folder: Path, openai_url: str = "http://127.0.0.1:1/v1") -> Settings:
    config = folder / "vectorsync.toml"
    config.write_text(
        settings_toml(
            broker=UNREACHABLE,
            cache=UNREACHABLE,
            database="postgresql://u@127.0.0.1:1/db",
            openai_url=openai_url,
            table="notes",
            collection="notes",
            dimensions=16,
            max_tokens=32,
            overlap=4,
        )
    )
    return load_settings(config)


def test_documents_are_the_chunks_the_workers_store(tmp_path: Path) -> None:
    rows = {str(i): note(i) for i in range(1, 40)}
    config = settings(tmp_path)
    docs = documents(rows, config, "notes")
    by_id = {f"{d.metadata['record_id']}:{d.metadata['chunk']}": (d.page_content, d.metadata) for d in docs}
    assert by_id == expected_chunks(config, "notes", rows)
    assert len(docs) == len(by_id) > len(rows)  # records of several chunks are among them


def test_peer_embeddings_are_the_workers_vectors_without_their_cache(tmp_path: Path) -> None:
    with FakeOpenAI(dimensions=16) as server:
        config = settings(tmp_path, server.url)
        embeddings = peer_embeddings(config)
        texts = ["pricing renewal call", "onboarding", "pricing renewal call"]
        assert embeddings.embed_documents(texts) == [served_embed(text, 16) for text in texts]
        assert embeddings.embed_query("churn review") == served_embed("churn review", 16)
        assert server.calls == 2  # nothing answered from a cache
    assert getattr(embeddings.embedder, "cache", "missing") is None
    assert Embeddings.from_settings(config).cache is not None  # the workers' own settings keep it on
