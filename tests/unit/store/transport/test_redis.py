"""store/transport/redis.py: every kombu method and attribute the transport overrides or reads is one that
``kombu_names`` names, the installed kombu has each with the parameters written there, and a kombu without any
one of them is refused, naming it, before the transport would run on it.

The names are found in the transport itself, not copied from the lists: its classes' own attributes that
kombu's classes have too (what it overrides), and, read from its source, what its methods take from ``self``,
``super()``, ``self.connection`` and kombu's module (what it reads). A new override or read that the lists do
not name fails here, so the check made at import keeps up with the code.
"""

from __future__ import annotations

import ast
import inspect

import pytest
from kombu.transport import redis

import store.transport.redis as transport
from store.transport.kombu_names import ATTRIBUTES, INSTANCE, METHODS, UnsupportedKombu, check, mismatches
from tests.unit.store.transport.test_kombu_names import fake_kombu

#: Each class of the transport, the kombu class it stands in for, and that class's name in ``kombu_names``.
STANDS_IN_FOR: list[tuple[type, type, str]] = [
    (transport.Taking, redis.Channel, "Channel"),
    (transport.QoS, redis.QoS, "QoS"),
    (transport.Channel, redis.Channel, "Channel"),
    (transport.SentinelChannel, redis.SentinelChannel, "SentinelChannel"),
    (transport.Transport, redis.Transport, "Transport"),
    (transport.SocketTransport, redis.Transport, "Transport"),
    (transport.SentinelTransport, redis.SentinelTransport, "SentinelTransport"),
]
#: Every name ``kombu_names`` checks as the transport is imported, or on a live channel (``INSTANCE``).
NAMED = {*METHODS, *ATTRIBUTES, *INSTANCE}
#: The kombu class an attribute of ``self`` or of a kombu object belongs to, as ``kombu_names`` writes it.
OWNER = {"Taking": "Channel", "QoS": "QoS", "connection": "Transport", "channel": "Channel"}


def overridden() -> set[str]:
    """The kombu names the transport's classes define again: methods, properties and class attributes."""
    found = set()
    for ours, theirs, named in STANDS_IN_FOR:
        for name in vars(ours):
            if not name.startswith("__") and hasattr(theirs, name):
                found.add(f"{named}.{name}")
    return found


def _defined_by_us() -> set[str]:
    """The attribute names the transport's own classes define or set on themselves."""
    tree = ast.parse(inspect.getsource(transport))
    names = {name for ours, _, _ in STANDS_IN_FOR for name in vars(ours)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
    kombu_owned = {name.split(".")[1] for name in overridden() | set(ATTRIBUTES) if "." in name}
    return names - kombu_owned


def read() -> set[str]:
    """The kombu names the transport's methods read: ``self.X`` and ``super().X`` in a class standing in for a
    kombu class, ``self.connection.X`` and ``self.channel.X`` (kombu's transport and channel), and kombu's
    module's own names (``redis.X``)."""
    tree = ast.parse(inspect.getsource(transport))
    ours = _defined_by_us()
    found = set()
    for cls in (node for node in tree.body if isinstance(node, ast.ClassDef) and node.name in OWNER):
        for node in ast.walk(cls):
            if not isinstance(node, ast.Attribute) or node.attr.startswith("__"):
                continue
            base = node.value
            is_self = isinstance(base, ast.Name) and base.id == "self"
            is_super = isinstance(base, ast.Call) and isinstance(base.func, ast.Name) and base.func.id == "super"
            if is_super or (is_self and node.attr not in ours):
                found.add(f"{OWNER[cls.name]}.{node.attr}")
            elif _of_self(base) and base.attr in OWNER and node.attr not in ours:
                found.add(f"{OWNER[base.attr]}.{node.attr}")
    modules = (n for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name))
    found |= {node.attr for node in modules if node.value.id == "redis"}
    return found


def _of_self(node: ast.expr) -> bool:
    """Whether ``node`` is ``self.X``."""
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"


def _named(name: str) -> bool:
    """Whether ``kombu_names`` checks ``name``: itself, or (a class) through the names it checks on it."""
    return name in NAMED or any(checked.startswith(f"{name}.") for checked in NAMED)


def test_the_transport_overrides_only_what_kombu_names_checks() -> None:
    found = overridden()
    assert {"Channel._brpop_start", "QoS.ack", "SentinelChannel.supports_batch_publish"} <= found  # the finder finds
    assert sorted(name for name in found if not _named(name)) == []


def test_the_transport_reads_only_what_kombu_names_checks() -> None:
    found = read()
    assert {"Channel._q_for_pri", "Channel.unacked_key", "Transport._deliver", "QoS.channel", "Empty"} <= found
    assert sorted(name for name in found if not _named(name)) == []


def test_the_installed_kombu_has_every_name_with_the_parameters_written() -> None:
    assert mismatches(redis) == []


@pytest.mark.parametrize("name", [*METHODS, *ATTRIBUTES])
def test_a_kombu_without_any_one_name_is_refused_naming_it(name: str) -> None:
    lacking = fake_kombu(name)
    assert f"{name} is missing" in mismatches(lacking)
    with pytest.raises(UnsupportedKombu, match=rf"\({name}(\.\w+)? is missing"):
        check(lacking)


def test_importing_the_transport_checks_kombu_first() -> None:
    """The module calls ``check`` on kombu's before it defines a class on it: a worker on another kombu stops at
    its import (worker/runtime/app.py), never mid-delivery."""
    tree = ast.parse(inspect.getsource(transport))
    calls = [
        n.lineno
        for n in tree.body
        if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call) and ast.unparse(n.value) == "check(redis)"
    ]
    first_class = min(n.lineno for n in tree.body if isinstance(n, ast.ClassDef))
    assert len(calls) == 1 and calls[0] < first_class
