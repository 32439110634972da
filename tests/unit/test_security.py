"""Doors closed (issue 9), those that need no server: no key to a stranger's endpoint, no secret in a message,
no Flower without a login (tests/integration/test_security.py: the cache and the CLI)."""

from __future__ import annotations

from pathlib import Path

import pytest

from store import ConfigError
from store.connect.postgres import safe_url
from store.embeddings.providers.openai import OpenAIProvider
from store.settings import ModelSettings, Settings, load_settings
from store.settings.urls import without_credentials
from tests.fake_openai import FakeOpenAI
from worker.runtime.flower import login_problem


def test_the_openai_key_goes_to_openai_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-the-real-openai-key-0123456789")
    with FakeOpenAI(dimensions=4) as server:
        model = ModelSettings(provider="openai", model="m", dimensions=4, base_url=server.url)
        OpenAIProvider(name="m", settings=model).embed_batch(["hello"])
        assert server.requests[0].authorization == "Bearer unused"
        monkeypatch.setenv("LOCAL_KEY", "sk-local")
        named = model.model_copy(update={"api_key_env": "LOCAL_KEY"})
        OpenAIProvider(name="m", settings=named).embed_batch(["hello"])
        assert server.requests[1].authorization == "Bearer sk-local"


def test_secrets_stay_out_of_messages_and_reprs(tmp_path: Path) -> None:
    config = tmp_path / "vectorsync.toml"
    config.write_text(
        '[models.m]\nprovider = "openai"\nmodel = "x"\ndimensions = 4\napi_key_env = "sk-proj-pasted-key-0123456789"\n'
    )
    with pytest.raises(ConfigError) as pasted:
        load_settings(config)
    assert "pasted-key" not in str(pasted.value)
    assert "must name the environment variable that holds the key" in str(pasted.value)
    settings = Settings.model_validate(
        {
            "vectors": {"url": "postgresql://app:hunter2@db/x?password=pw2"},
            "broker": {"url": "redis://:r3dis@cache:6379/0"},
        }
    )
    shown = repr(settings)
    assert "hunter2" not in shown and "pw2" not in shown and "r3dis" not in shown
    assert "pw2" not in safe_url("postgresql://app@db/x?sslmode=require&password=pw2")
    assert without_credentials("http://qdrant:6333/?api_key=abc&x=1") == "http://qdrant:6333/?api_key=***&x=1"


def test_flower_refuses_to_start_without_a_real_login() -> None:
    assert "Flower has no login" in (login_problem({}) or "")
    assert "example's password 'change-me'" in (login_problem({"FLOWER_BASIC_AUTH": "admin:change-me"}) or "")
    assert "each with a password" in (login_problem({"FLOWER_BASIC_AUTH": "admin"}) or "")
    assert login_problem({"FLOWER_BASIC_AUTH": "ops:9f2c7e1a"}) is None
    assert login_problem({"FLOWER_AUTH": ".*@example.com"}) is None


def test_flower_refuses_an_api_without_a_login_even_with_one_set() -> None:
    """FLOWER_UNAUTHENTICATED_API let anyone enqueue tasks through the API (issue 32, defect 7)."""
    login = {"FLOWER_BASIC_AUTH": "ops:9f2c7e1a"}
    assert "API would answer without a login" in (login_problem({**login, "FLOWER_UNAUTHENTICATED_API": "true"}) or "")
    assert "API would answer without a login" in (login_problem(login, ["--unauthenticated_api=True"]) or "")
    assert login_problem({**login, "FLOWER_UNAUTHENTICATED_API": "false"}) is None
