"""The settings ``vectorsync dev`` writes and the model it chooses: they load, their sources read the corpus
tables, and capture is on (the real thing: tests/integration/producer/cli/dev/test_harness.py)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from producer.cli.dev.config import ModelChoice, choose_model, settings_toml
from producer.cli.dev.corpus import CRM_TABLE, TOPICS_TABLE
from producer.cli.dev.samples import load_corpus
from store.settings import load_settings

LOCAL = ModelChoice("minilm", "local", "all-MiniLM-L6-v2", "installed")
FAKE = ModelChoice("fake", "fake", "fake", "not installed")


@pytest.mark.parametrize("model", [LOCAL, FAKE], ids=["local", "fake"])
@pytest.mark.usefixtures("no_vectorsync_env")
def test_settings_load_with_load_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model: ModelChoice) -> None:
    database = 'postgresql://postgres:@/vectorsync?host=/tmp/a "quoted" dir'
    path = tmp_path / "vectorsync.toml"
    path.write_text(
        settings_toml(
            broker_url="redis://127.0.0.1:6390/0",
            cache_url="redis://127.0.0.1:6390/1",
            database_url=database,
            model=model,
        )
    )
    settings = load_settings(path)
    assert settings.broker.url == "redis://127.0.0.1:6390/0"
    assert settings.cache_url == "redis://127.0.0.1:6390/1"
    assert settings.vectors.store == "pgvector" and settings.vectors.url == database
    assert settings.state_url == database
    assert settings.vectors.dimensions == 384
    assert settings.embeddings.chain == [model.name]
    assert settings.models[model.name].provider == model.provider
    assert settings.models[model.name].dimensions == 384
    assert set(settings.collections) == {"docs", "crm_notes"}
    assert settings.retrieval.answer == []  # the fake chat model
    path.write_text(
        settings_toml(
            broker_url="redis://127.0.0.1:6390/0",
            cache_url="redis://127.0.0.1:6390/1",
            database_url=database,
            model=model,
            chat=("http://127.0.0.1:8000/v1", "qwen"),
        )
    )
    chatty = load_settings(path)
    assert chatty.retrieval.answer == ["chat"] and chatty.models["chat"].task == "chat"
    assert (chatty.models["chat"].base_url, chatty.models["chat"].model) == ("http://127.0.0.1:8000/v1", "qwen")
    docs, notes = settings.collections["docs"], settings.collections["crm_notes"]
    assert (docs.source.kind, docs.source.table, docs.source.id) == ("sql", TOPICS_TABLE, "topic")
    assert docs.source.metadata == ["kind", "topic", "length"]
    assert docs.chunker.markdown is False and 0 < docs.chunker.overlap < docs.chunker.max_tokens
    assert (notes.source.kind, notes.source.table) == ("sql", CRM_TABLE)
    assert notes.source.metadata == ["kind", "owner", "created_at"]
    assert notes.source.url == database
    assert (docs.source.capture, notes.source.capture) == ("trigger", "trigger")  # a psql UPDATE reaches the index


def test_sources_read_the_corpus_tables(tmp_path: Path) -> None:
    """The settings' text templates and metadata columns fit the tables load_corpus makes."""
    from worker.sources.sql import SqlSource

    url = f"sqlite:///{tmp_path / 'corpus.db'}"
    load_corpus(url)
    path = tmp_path / "vectorsync.toml"
    text = settings_toml(
        broker_url="redis://127.0.0.1:1/0", cache_url="redis://127.0.0.1:1/1", database_url=url, model=FAKE
    )
    # Capture needs PostgreSQL (tests/integration/producer/cli/dev/test_harness.py runs it); SQLite reads the same
    # columns.
    path.write_text(re.sub(r"^capture = .*$", "", text, flags=re.M))
    settings = load_settings(path)
    for name, record_id in (("docs", "try"), ("crm_notes", "14")):
        source = settings.collections[name].source
        assert source.url == url
        sql = SqlSource(source)
        try:
            record = sql.fetch([record_id])[record_id]
        finally:
            sql.close()
        assert record.text.strip() and set(record.metadata) == set(source.metadata)
    assert record.metadata["kind"] == "call"
    assert str(record.metadata["created_at"]).startswith("2026-09-24T15:00:00")


def test_choose_model(monkeypatch: pytest.MonkeyPatch) -> None:
    assert choose_model("fake").provider == "fake"
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # import fails
    choice = choose_model()
    assert choice.provider == "fake" and "sentence-transformers" in choice.why
    from producer.cli.dev.processes import DevServiceError

    with pytest.raises(DevServiceError, match="--model local"):
        choose_model("local")
