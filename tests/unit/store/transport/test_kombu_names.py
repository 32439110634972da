"""store/transport/kombu_names.py: the kombu names the broker transport relies on, checked when it is imported;
a kombu that lacks one, or has one with other parameters, refused in one line (that the lists hold every name the
transport overrides or reads, and each refused alone: tests/unit/store/transport/test_redis.py)."""

from __future__ import annotations

import inspect
import types
from typing import Any

import pytest
from kombu.transport import redis

from store.errors import ConfigError
from store.transport.kombu_names import ATTRIBUTES, METHODS, SUPPORTED, UnsupportedKombu, check, mismatches


class _Without:
    """A kombu class's attributes but ``missing``, as a kombu that never had it (5.5 and 5.6 lack
    ``_flush_brpop_reauth``)."""

    def __init__(self, cls: type, missing: str) -> None:
        for name in dir(cls):
            if name != missing and not name.startswith("__"):
                setattr(self, name, inspect.getattr_static(cls, name))


def fake_kombu(missing: str = "", **replaced: Any) -> types.SimpleNamespace:
    """kombu's Redis transport module without ``missing`` (a class, or a name of one), ``replaced`` put in."""
    owners = {name.split(".")[0] for name in (*METHODS, *ATTRIBUTES)}
    module: dict[str, Any] = {name: getattr(redis, name) for name in owners} | replaced
    owner, _, name = missing.partition(".")
    if name:
        module[owner] = _Without(module[owner], name)
    elif owner:
        del module[owner]
    return types.SimpleNamespace(**module)


def test_the_installed_kombu_is_taken() -> None:
    assert mismatches(fake_kombu()) == mismatches(redis) == []
    check(redis)


def test_a_kombu_without_a_name_is_refused_in_one_line_naming_it_and_the_supported_range() -> None:
    old = fake_kombu("Channel._flush_brpop_reauth")
    assert mismatches(old) == ["Channel._flush_brpop_reauth is missing"]
    with pytest.raises(UnsupportedKombu) as raised:
        check(old)
    message = str(raised.value)
    assert "\n" not in message and isinstance(raised.value, ConfigError)
    assert "Channel._flush_brpop_reauth is missing" in message and f"kombu[redis]{SUPPORTED}" in message


def test_a_method_whose_parameters_changed_is_named_with_both_signatures() -> None:
    class Changed(redis.Channel):
        def _put(self, queue: str, message: dict[str, Any]) -> None: ...

    assert mismatches(fake_kombu(Channel=Changed)) == [
        "Channel._put(self, queue, message) is not Channel._put(self, queue, message, **kwargs)"
    ]
