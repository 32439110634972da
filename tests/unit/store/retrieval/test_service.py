"""Rerank and grounded answers through the real openai client and httpx, against the project's local server
(chat completions and /rerank) that fails on command."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import REGISTRY

from store.embeddings import Embeddings
from store.errors import ConfigError, PermanentError
from store.query import aanswer, arerank
from store.retrieval import Retrieval
from store.retrieval.providers.fake import FakeChat
from store.settings import Settings
from store.vectors import VectorMatch, VectorRecord
from store.vectors.backends import memory_store
from tests.fake_openai import FAST_RETRIES, FakeOpenAI

NOTES = [
    ("acme-1", "acme", "Refunds at Acme are paid within 14 days of the request, to the original card."),
    ("acme-2", "acme", "Acme's onboarding takes two weeks and starts with a kickoff call."),
    ("acme-3", "acme", "The Acme office moved to Berlin in spring."),
    ("globex-1", "globex", "Globex refunds are paid in store credit only, never to the card."),
    ("globex-2", "globex", "Globex secret: the merger with Initech closes in March."),
]


@pytest.fixture
def servers() -> Iterator[tuple[FakeOpenAI, FakeOpenAI]]:
    with FakeOpenAI() as primary, FakeOpenAI() as backup:
        yield primary, backup


def model(server: FakeOpenAI, task: str, provider: str = "openai", **extra: Any) -> dict[str, Any]:
    return {
        "task": task,
        "provider": provider,
        "model": f"{task}-model",
        "base_url": server.url,
        "timeout": 2.0,
        **extra,
    }


def build(*, rerank: list[dict[str, Any]] | None = None, chat: list[dict[str, Any]] | None = None) -> Retrieval:
    models = {f"r{i}": m for i, m in enumerate(rerank or [])} | {f"c{i}": m for i, m in enumerate(chat or [])}
    settings = Settings.model_validate(
        {
            "models": models,
            "embeddings": {"cache_ttl_days": 0, **FAST_RETRIES},
            "retrieval": {
                "rerank": [n for n in models if n.startswith("r")],
                "answer": [n for n in models if n.startswith("c")],
                "candidates": 5,
                "top": 3,
            },
            "vectors": {"store": "memory", "dimensions": 64},
        }
    )
    store = memory_store(dimensions=64, embedder=Embeddings.from_settings(settings))
    notes = store.get_collection("notes", create=True)
    embedder = Embeddings.from_settings(settings)
    notes.upsert_many(
        [
            VectorRecord(f"{rid}:0", embedder.embed(text), text, {"record_id": rid, "tenant": tenant})
            for rid, tenant, text in NOTES
        ]
    )
    return Retrieval.from_settings(settings, store=store)


def matches(*texts: str) -> list[VectorMatch]:
    return [VectorMatch(f"m{i}", 0.9 - i * 0.1, text, {"record_id": f"r{i}"}) for i, text in enumerate(texts)]


CANDIDATES = matches("the office moved to Berlin", "refunds go to the original card", "card refunds take 14 days")


def test_the_fake_reranker_keeps_the_search_order_and_calls_nothing(servers: tuple[FakeOpenAI, FakeOpenAI]) -> None:
    ranked = build().rerank("card refunds", CANDIDATES, top=2)
    assert [m.id for m in ranked] == ["m0", "m1"] and all(0 <= m.score <= 1 for m in ranked)
    assert servers[0].calls == 0 and servers[1].calls == 0


@pytest.mark.parametrize("kind", ["openai", "cohere", "tei"])
def test_rerank_reorders_by_the_model_and_replaces_scores(kind: str, servers: tuple[FakeOpenAI, FakeOpenAI]) -> None:
    server = servers[0]
    entry = (
        model(server, "rerank")
        if kind == "openai"
        else model(server, "rerank", provider="http", base_url=server.root, rerank_api=kind)
    )
    ranked = build(rerank=[entry]).rerank("card refunds take days", CANDIDATES)
    assert [m.id for m in ranked] == ["m2", "m1", "m0"]
    assert ranked[0].score == pytest.approx(1.0) and ranked[-1].score == pytest.approx(0.0)
    assert server.calls == 1  # every candidate scored in one call
    sent = server.requests[0].body
    assert "refunds go to the original card" in str(sent)


def test_a_reranker_that_scores_too_few_passages_fails_over(servers: tuple[FakeOpenAI, FakeOpenAI]) -> None:
    primary, backup = servers
    primary.always(drop=1)
    entries = [model(s, "rerank", provider="http", base_url=s.root) for s in (primary, backup)]
    ranked = build(rerank=entries).rerank("card refunds take days", CANDIDATES, top=1)
    assert [m.id for m in ranked] == ["m2"] and primary.calls == 1 and backup.calls == 1


def test_an_answer_cites_real_passages_and_invented_numbers_are_dropped(servers: tuple[FakeOpenAI, FakeOpenAI]) -> None:
    server = servers[0]
    server.reply_chat({"answer": "Within 14 days, to the card.", "sources": [1, 7, 1, -2], "answered": True})
    grounded = build(chat=[model(server, "chat")]).answer("notes", "how are acme refunds paid?")
    assert grounded.answered and grounded.answer == "Within 14 days, to the card."
    [source] = grounded.sources
    assert source.number == 1 and source.chunk_id.endswith(":0") and source.record_id == source.chunk_id[:-2]
    assert source.excerpt and 0 <= source.score <= 1 and source.metadata["record_id"] == source.record_id
    assert grounded.model == "chat-model"


def test_only_invented_sources_mean_not_answered(servers: tuple[FakeOpenAI, FakeOpenAI]) -> None:
    servers[0].reply_chat({"answer": "It is 42.", "sources": [99], "answered": True})
    grounded = build(chat=[model(servers[0], "chat")]).answer("notes", "what is the answer?")
    assert not grounded.answered and grounded.sources == [] and "cited no passage it was shown" in grounded.reason


def test_answered_false_passes_through_with_its_reason(servers: tuple[FakeOpenAI, FakeOpenAI]) -> None:
    servers[0].reply_chat({"answer": "The passages do not mention parking.", "sources": [], "answered": False})
    grounded = build(chat=[model(servers[0], "chat")]).answer("notes", "where do I park?")
    assert not grounded.answered and grounded.reason == "The passages do not mention parking."


def test_the_callers_filter_keeps_another_tenants_passages_out_of_the_prompt(
    servers: tuple[FakeOpenAI, FakeOpenAI],
) -> None:
    server = servers[0]
    retrieval = build(chat=[model(server, "chat")])
    grounded = retrieval.answer(
        "notes", "how are refunds paid, and what is the secret merger?", filter={"tenant": "acme"}
    )
    [prompt] = server.chat_prompts()
    assert "Refunds at Acme" in prompt
    assert "Globex" not in prompt and "Initech" not in prompt
    assert all(source.metadata["tenant"] == "acme" for source in grounded.sources)
    unfiltered = retrieval.answer("notes", "what is the secret merger?")
    assert unfiltered.answered and "Initech" in server.chat_prompts()[-1]  # the data is there: the filter held


def test_chat_models_fail_over_and_bad_json_is_the_models_failure(servers: tuple[FakeOpenAI, FakeOpenAI]) -> None:
    primary, backup = servers
    primary.always(status=503)
    retrieval = build(chat=[model(primary, "chat"), model(backup, "chat")])
    assert retrieval.answer("notes", "how are acme refunds paid?").answered
    assert primary.calls == 3 and backup.calls == 1  # three tries (max_attempts), then the backup

    with FakeOpenAI() as first, FakeOpenAI() as second:
        first.reply_chat("this is not JSON")
        retrieval = build(chat=[model(first, "chat"), model(second, "chat")])
        assert retrieval.answer("notes", "how are acme refunds paid?").answered
        assert (first.calls, second.calls) == (1, 1)
        alone = build(chat=[model(first, "chat")])
        first.reply_chat("[1, 2, 3]")
        with pytest.raises(PermanentError, match="answered list JSON, not an object"):
            alone.answer("notes", "how are acme refunds paid?")


def test_a_server_without_schemas_gets_json_mode_and_is_remembered(servers: tuple[FakeOpenAI, FakeOpenAI]) -> None:
    server = servers[0]
    server.refuse_schemas = True
    retrieval = build(chat=[model(server, "chat")])
    assert retrieval.answer("notes", "how are acme refunds paid?").answered
    assert retrieval.answer("notes", "when does acme onboarding start?").answered
    kinds = [r.body["response_format"]["type"] for r in server.requests]
    assert kinds == ["json_schema", "json_object", "json_object"]
    assert "schema" in server.requests[-1].body["messages"][0]["content"]


def test_bad_questions_and_empty_results_are_clear() -> None:
    retrieval = build()
    with pytest.raises(ConfigError, match="the question is empty"):
        retrieval.answer("notes", "   ")
    nothing = retrieval.answer("notes", "refunds", filter={"tenant": "initech"})
    assert not nothing.answered and nothing.reason == "no passage in 'notes' matches the question and the filter"
    chat = retrieval.chats.entries[0]
    assert isinstance(chat, FakeChat) and chat.prompts == []  # no model was asked


def test_the_fake_chat_answers_from_the_first_passage_and_keeps_the_prompt() -> None:
    retrieval = build()
    grounded = retrieval.answer("notes", "how are acme refunds paid?", filter={"tenant": "acme"})
    chat = retrieval.chats.entries[0]
    assert isinstance(chat, FakeChat)
    assert grounded.answered and grounded.sources[0].number == 1 and grounded.model == "fake"
    assert "Question: how are acme refunds paid?" in chat.prompts[0][-1]["content"]


def test_costs_are_counted_per_task_model_and_user(servers: tuple[FakeOpenAI, FakeOpenAI]) -> None:
    labels = {"task": "chat", "model": "chat-model", "user": "alice"}
    before = REGISTRY.get_sample_value("vectorsync_model_tokens_total", labels) or 0.0
    build(chat=[model(servers[0], "chat")]).answer("notes", "how are acme refunds paid?", user="alice")
    assert REGISTRY.get_sample_value("vectorsync_model_calls_total", labels) >= 1
    assert REGISTRY.get_sample_value("vectorsync_model_tokens_total", labels) == before + 15  # the server's usage


def test_rerank_calls_are_attributed_to_their_user(servers: tuple[FakeOpenAI, FakeOpenAI]) -> None:
    labels = {"task": "rerank", "model": "rerank-model", "user": "bob"}
    before = REGISTRY.get_sample_value("vectorsync_model_calls_total", labels) or 0.0
    build(rerank=[model(servers[0], "rerank")]).rerank("card refunds", CANDIDATES, user="bob")
    assert REGISTRY.get_sample_value("vectorsync_model_calls_total", labels) == before + 1


def test_async_twins(servers: tuple[FakeOpenAI, FakeOpenAI]) -> None:
    retrieval = build(chat=[model(servers[0], "chat")])
    grounded = asyncio.run(aanswer("notes", "how are acme refunds paid?", retrieval=retrieval))
    ranked = asyncio.run(arerank("refunds", CANDIDATES, top=1, retrieval=retrieval))
    assert grounded.answered and [m.id for m in ranked] == ["m0"]


def test_settings_check_tasks_and_the_local_reranker_says_what_it_needs(tmp_path: Any) -> None:
    with pytest.raises(ConfigError, match="retrieval.answer names 'e0', whose task is 'embed'"):
        Retrieval.from_settings(
            Settings.model_validate(
                {
                    "models": {"e0": {"provider": "fake", "model": "x", "dimensions": 4}},
                    "embeddings": {"chain": ["e0"]},
                    "retrieval": {"answer": ["e0"]},
                    "vectors": {"store": "memory", "dimensions": 4},
                }
            ),
            store=memory_store(dimensions=4),
        )
    with pytest.raises(ValueError, match="provider 'ollama' cannot serve task 'chat'"):
        Settings.model_validate({"models": {"c": {"task": "chat", "provider": "ollama", "model": "x"}}})
    from store.retrieval.providers.local import LocalReranker
    from store.settings import ModelSettings

    missing = ModelSettings(task="rerank", provider="local", model=str(tmp_path / "no-such-model"))
    with pytest.raises(ConfigError, match="is neither a local directory nor an installed package"):
        LocalReranker(name="local_rerank", settings=missing)


def test_doctor_makes_one_real_call_to_each_rerank_and_chat_model(servers: tuple[FakeOpenAI, FakeOpenAI]) -> None:
    from producer.cli.doctor import retrieval_checks

    primary, backup = servers
    backup.always(status=401, message="Incorrect API key provided")
    settings = Settings.model_validate(
        {
            "models": {"r0": model(primary, "rerank"), "c0": model(primary, "chat"), "c1": model(backup, "chat")},
            "retrieval": {"rerank": ["r0"], "answer": ["c0", "c1"]},
            "vectors": {"store": "memory", "dimensions": 4},
        }
    )
    found = {check.part: check for check in retrieval_checks(settings)}
    assert (found["rerank model r0"].status, found["chat model c0"].status) == ("ok", "ok")
    assert found["chat model c1"].status == "warn" and "answered 401" in found["chat model c1"].detail
    assert found["chat model c1"].fix.startswith("check models.c1")
    assert primary.calls == 2 and backup.calls == 1
