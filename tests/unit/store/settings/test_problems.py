"""How a bad setting is told: the key, the value as a message may show it, the fix, the variable that sets it."""

from __future__ import annotations

import pytest

from store.settings.problems import describe, env_problem


def error(
    loc: tuple[object, ...], kind: str = "value_error", msg: str = "Value error, too big", **more: object
) -> dict[str, object]:
    return {"loc": loc, "type": kind, "msg": msg, **more}


def test_an_unknown_or_missing_key_is_named_with_its_variable() -> None:
    assert describe(error(("vectors", "dimension"), "extra_forbidden")) == (
        "unknown setting 'vectors.dimension': remove it or check its spelling (env VECTORSYNC_VECTORS__DIMENSION)"
    )
    assert describe(error(("models", "m", "model"), "missing")) == (
        "setting 'models.m.model' is required (env VECTORSYNC_MODELS__M__MODEL)"
    )


def test_a_bad_value_is_shown_without_credentials_or_whole_sections() -> None:
    assert describe(error(("state", "url"), input="postgresql://u:hunter2@db/x")) == (
        "setting state.url = 'postgresql://db/x' is not allowed: too big (env VECTORSYNC_STATE__URL)"
    )
    assert "<dict>" in describe(error(("collections", "x"), input={"url": "postgresql://u:pw@db/x"}))
    assert "<hidden>" in describe(error(("vectors", "key"), input="abc"))
    assert "= 12 is not allowed" in describe(error(("broker", "heartbeat"), input=12))


def test_a_pasted_key_is_never_echoed() -> None:
    shown = describe(error(("models", "m", "api_key_env"), input="sk-secret-0123"))
    assert "sk-secret" not in shown and 'set models.m.api_key_env = "MY_KEY"' in shown


def test_an_error_of_the_whole_model_is_its_message() -> None:
    assert describe(error((), msg="Value error, broker.visibility_timeout (1) must be above")) == (
        "broker.visibility_timeout (1) must be above"
    )


def test_environment_problems_name_the_variables_with_secrets_hidden(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VECTORSYNC_VECTORS__KEY", "abc")
    monkeypatch.setenv("VECTORSYNC_VECTORS__INDEX_FIELDS", "not json")
    monkeypatch.setenv("VECTORSYNC_CONFIG", "/etc/vectorsync.toml")
    shown = env_problem('error parsing value for field "vectors" from source "EnvSettingsSource"')
    assert shown == (
        "bad settings in the environment (VECTORSYNC_VECTORS__INDEX_FIELDS='not json', "
        "VECTORSYNC_VECTORS__KEY=<hidden>)"
    )
