"""Tenancy that cannot be forgotten: a collection with a required filter is searched only within one value of
each field, through every door (Collection.search, store.query, answers, the CLI)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

import store.query as query
from store import ConfigError, Filter, Settings, VectorRecord, VectorStore, load_settings
from store.process.defaults import use_client
from store.retrieval import Retrieval
from store.vectors.backends import memory_store
from store.vectors.tenancy import pinned_fields

NOTES = [
    VectorRecord("a:0", [1, 0, 0, 0], "refunds at acme take 14 days", {"workspace_id": 7, "kind": "call"}),
    VectorRecord("b:0", [0.9, 0.1, 0, 0], "refunds at initech take 30 days", {"workspace_id": 8, "kind": "call"}),
]


class CountingEmbedder:
    """Turns any text into the first axis, counting calls: a refused search must embed nothing."""

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, text: str) -> Sequence[float]:
        self.calls += 1
        return [1.0, 0.0, 0.0, 0.0]


@pytest.mark.parametrize(
    ("filter", "pinned"),
    [
        (None, set()),
        ({"workspace_id": 7}, {"workspace_id"}),
        ({"workspace_id": {"$in": [7]}}, {"workspace_id"}),
        ({"workspace_id": {"$in": [7, 7]}}, {"workspace_id"}),
        ({"workspace_id": {"$in": [7, 8]}}, set()),
        ({"workspace_id": {"$in": [1, 1.0]}}, {"workspace_id"}),  # one number
        ({"workspace_id": {"$in": [1, True]}}, set()),  # a number and a boolean never equal
        ({"workspace_id": 7, "kind": "call"}, {"workspace_id", "kind"}),
        ({"$and": [{"$and": [{"workspace_id": 7}]}, {"n": {"$gte": 2}}]}, {"workspace_id"}),
        ({"$or": [{"workspace_id": 7}, {"workspace_id": 7}]}, set()),  # an OR never counts, even a safe one
        ({"$or": [{"workspace_id": 7}, {"kind": "call"}]}, set()),
        ({"$not": {"workspace_id": {"$ne": 7}}}, set()),
        ({"workspace_id": {"$gte": 7, "$lte": 7}}, set()),
        ({"workspace_id": {"$ne": 7}}, set()),
    ],
)
def test_a_field_is_pinned_only_by_an_equality_anded_at_the_top(filter: dict | None, pinned: set[str]) -> None:
    assert pinned_fields(Filter.from_dict(filter) if filter else None) == pinned


@pytest.fixture
def tenanted() -> tuple[VectorStore, CountingEmbedder]:
    embedder = CountingEmbedder()
    store = memory_store(dimensions=4, embedder=embedder)
    store.require_filter("notes", ["workspace_id"])
    store.get_collection("notes", create=True).upsert_many(NOTES)
    return store, embedder


def test_a_search_without_the_required_filter_is_refused_before_anything_is_embedded(
    tenanted: tuple[VectorStore, CountingEmbedder],
) -> None:
    store, embedder = tenanted
    notes = store.get_collection("notes", create=True)
    with pytest.raises(ConfigError) as refused:
        notes.search("refunds")
    message = str(refused.value)
    assert "collection 'notes' is searched only with an equality filter on workspace_id" in message
    assert "(collections.notes.required_filter), but the search has no filter: pass e.g." in message
    example = '{"workspace_id": <value>}'
    assert f"filter={example} (vectorsync search/ask: --filter '{example}')" in message
    escaping = Filter.eq("workspace_id", 7) | Filter.eq("kind", "call")
    for wrong in (Filter.eq("kind", "call"), escaping, Filter.any_of("workspace_id", [7, 8])):
        with pytest.raises(ConfigError, match="workspace_id"):
            notes.search("refunds", filter=wrong)
    assert embedder.calls == 0
    scoped = notes.search("refunds", filter=Filter.eq("workspace_id", 7) & Filter.eq("kind", "call"))
    assert [m.id for m in scoped] == ["a:0"]
    with pytest.raises(ConfigError, match="equality filter on workspace_id"):
        notes.count()  # a count tells how much another tenant holds
    assert notes.count(Filter.eq("workspace_id", 7)) == 1


def test_a_store_applies_the_required_filter_to_collections_it_opens_later() -> None:
    store = memory_store(dimensions=4)
    store.require_filter("notes", ["workspace_id", "workspace_id", "team.id"])
    with pytest.raises(ConfigError, match="equality filter on workspace_id, team.id "):
        store.get_collection("notes", create=True).search([1, 0, 0, 0])
    with pytest.raises(ConfigError, match=r'on team.id .* filter \{"workspace_id": \{"\$eq": 7\}\} does not pin it'):
        store.get_collection("notes", create=True).search([1, 0, 0, 0], filter=Filter.eq("workspace_id", 7))
    with pytest.raises(ConfigError, match="filter field 'bad field' is not allowed"):
        store.require_filter("notes", ["bad field"])
    with pytest.raises(ConfigError, match="a list of names"):
        store.require_filter("notes", "workspace_id")


@pytest.fixture
def settings_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    config = tmp_path / "vectorsync.toml"
    config.write_text(
        '[vectors]\nstore = "memory"\ndimensions = 4\n[embeddings]\ncache_ttl_days = 0\n'
        '[collections.notes]\nrequired_filter = ["workspace_id"]\n'
    )
    monkeypatch.setenv("VECTORSYNC_CONFIG", str(config))
    previous = use_client(None)  # the default client is built from this file at its first use
    yield config
    built = use_client(previous)
    if built is not None:
        built.close()


def test_the_settings_declare_it_and_every_door_refuses_an_unscoped_search(settings_file: Path) -> None:
    settings = load_settings()
    assert settings.collections["notes"].required_filter == ["workspace_id"]
    built = query.store_from_settings(settings)
    assert built.required_filters == {"notes": ("workspace_id",)}
    bare = memory_store(dimensions=4)  # built by hand: the settings' rule is checked against the collection's
    bare.get_collection("notes", create=True).upsert_many(NOTES)
    with pytest.raises(ConfigError, match=r'required_filter is \[\] there, \["workspace_id"\] in these settings'):
        query.search("notes", [1, 0, 0, 0], store=bare)
    bare.set_rules("notes", required_filter=("workspace_id",))
    with pytest.raises(ConfigError, match="collection 'notes' is searched only with an equality filter"):
        query.search("notes", [1, 0, 0, 0], store=bare)
    assert [m.id for m in query.search("notes", [1, 0, 0, 0], filter={"workspace_id": 8}, store=bare)] == ["b:0"]
    retrieval = Retrieval.from_settings(settings, store=memory_store(dimensions=4, embedder=CountingEmbedder()))
    retrieval.store.get_collection("notes", create=True).upsert_many(NOTES)  # made with the settings' rule
    with pytest.raises(ConfigError, match="equality filter on workspace_id"):
        query.answer("notes", "how long do refunds take?", retrieval=retrieval)
    grounded = query.answer("notes", "how long do refunds take?", filter={"workspace_id": 7}, retrieval=retrieval)
    assert [s.record_id for s in grounded.sources] == ["a:0"]


def test_bad_required_filter_settings_fail_at_load(tmp_path: Path) -> None:
    config = tmp_path / "vectorsync.toml"
    config.write_text('[collections.notes]\nrequired_filter = ["workspace id"]\n')
    with pytest.raises(ConfigError, match=r"collections\.notes\.required_filter\.0 = 'workspace id' is not allowed"):
        load_settings(config)


def test_the_cli_refuses_an_unscoped_search_and_question(settings_file: Path) -> None:
    from producer.cli import app

    runner = CliRunner()
    for command in (["search", "notes", "refunds"], ["ask", "notes", "how long do refunds take?"]):
        refused = runner.invoke(app, command)
        assert refused.exit_code == 2
        assert "error: collection 'notes' is searched only with an equality filter on workspace_id" in refused.output
    scoped = runner.invoke(app, ["search", "notes", "refunds", "--filter", '{"workspace_id": 7}'])
    assert scoped.exit_code == 0, scoped.output


def test_allow_drops_the_hits_the_app_refuses_before_any_model_sees_them() -> None:
    from store.retrieval.providers import FakeChat, FakeReranker

    settings = load_settings_for_memory()
    retrieval = Retrieval.from_settings(settings, store=memory_store(dimensions=4, embedder=CountingEmbedder()))
    retrieval.store.get_collection("notes", create=True).upsert_many(NOTES)  # made with the settings' rule
    reranker, chat = retrieval.rerankers.entries[0], retrieval.chats.entries[0]
    assert isinstance(reranker, FakeReranker) and isinstance(chat, FakeChat)
    seen: list[list[str]] = []

    def readable(matches: list) -> list:  # the app's own rule: this user may read record a only
        seen.append([m.id for m in matches])
        return [m for m in matches if m.id.startswith("a:")]

    grounded = query.answer("notes", "how long do refunds take?", allow=readable, retrieval=retrieval)
    assert seen == [["a:0", "b:0"]] and [s.chunk_id for s in grounded.sources] == ["a:0"]
    assert "initech" not in str(chat.prompts) and "acme" in str(chat.prompts)
    hidden = query.answer("notes", "how long do refunds take?", allow=lambda matches: [], retrieval=retrieval)
    assert not hidden.answered and hidden.reason == "no passage in 'notes' matches the question"  # tells nothing
    assert len(chat.prompts) == 1
    with pytest.raises(ConfigError, match="allow must return the matches the caller may read"):
        query.answer("notes", "refunds?", allow=lambda matches: None, retrieval=retrieval)  # type: ignore[arg-type,return-value]


def load_settings_for_memory() -> Settings:
    return Settings.model_validate(
        {"vectors": {"store": "memory", "dimensions": 4}, "embeddings": {"cache_ttl_days": 0}}
    )
