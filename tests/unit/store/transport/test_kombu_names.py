"""store/transport/kombu_names.py: the kombu names the broker transport relies on, checked when it is imported."""

from __future__ import annotations

import types
from typing import Any

import pytest
from kombu.transport import redis

from store.errors import ConfigError
from store.transport.kombu_names import SUPPORTED, UnsupportedKombu, check, mismatches


def test_the_installed_kombu_has_every_name_as_expected() -> None:
    assert mismatches(redis) == []
    check(redis)


class _Without:
    """A class's attributes but one, as a kombu that never had it (5.5 and 5.6 lack ``_flush_brpop_reauth``)."""

    def __init__(self, cls: type, missing: str) -> None:
        for name in dir(cls):
            if name != missing and not name.startswith("__"):
                setattr(self, name, getattr(cls, name))


def _kombu(channel: Any) -> types.SimpleNamespace:
    """kombu's Redis transport module with ``channel`` for its Channel."""
    names = ("QoS", "SentinelChannel", "SentinelTransport", "Transport", "Empty")
    return types.SimpleNamespace(Channel=channel, **{name: getattr(redis, name) for name in names})


def test_a_kombu_without_a_name_is_refused_in_one_line_naming_it_and_the_supported_range() -> None:
    old = _kombu(_Without(redis.Channel, "_flush_brpop_reauth"))
    assert mismatches(old) == ["Channel._flush_brpop_reauth is missing"]
    with pytest.raises(UnsupportedKombu) as raised:
        check(old)
    message = str(raised.value)
    assert "\n" not in message and isinstance(raised.value, ConfigError)
    assert "Channel._flush_brpop_reauth is missing" in message and f"kombu[redis]{SUPPORTED}" in message


def test_a_method_whose_parameters_changed_is_named_with_both_signatures() -> None:
    class Changed(redis.Channel):
        def _put(self, queue: str, message: dict[str, Any]) -> None: ...

    assert mismatches(_kombu(Changed)) == [
        "Channel._put(self, queue, message) is not Channel._put(self, queue, message, **kwargs)"
    ]
