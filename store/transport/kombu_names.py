"""Every name of kombu's Redis transport that ``store.transport.redis`` overrides, calls or reads, with the
parameters it expects: checked when the transport is imported, so a kombu outside the tested range stops a
worker at its start with one line naming the range, not mid-delivery with an AttributeError.

Names a channel and its QoS set on themselves as a channel opens (``INSTANCE``) are checked on a live channel by
``tests/integration/store/transport/test_kombu_names.py``; ``tests/unit/store/transport/test_redis.py`` finds
every name the transport overrides or reads in these lists.
"""

from __future__ import annotations

import inspect
from types import ModuleType
from typing import Any

from store.errors import ConfigError

__all__ = ["ATTRIBUTES", "INSTANCE", "METHODS", "SUPPORTED", "UnsupportedKombu", "check", "mismatches"]

#: The kombu releases the transport is tested on (pyproject.toml's range).
SUPPORTED = ">=5.7,<5.8"

#: Methods, each with its parameters as ``inspect.signature`` shows them.
METHODS: dict[str, str] = {
    "Channel._brpop_start": "(self, timeout=None)",
    "Channel._brpop_read": "(self, **options)",
    "Channel._put": "(self, queue, message, **kwargs)",
    "Channel._do_restore_message": "(self, payload, exchange, routing_key, pipe, leftmost=False)",
    "Channel._basic_cancel": "(self, consumer_tag)",
    "Channel.basic_consume": "(self, queue, *args, **kwargs)",
    "Channel._flush_brpop_reauth": "(self)",
    "Channel._q_for_pri": "(self, queue, pri)",
    "Channel.conn_or_acquire": "(self, client=None)",
    # It came with ``_put``'s ``_publish_batch`` keyword (kombu 5.7), which ``_put`` here hands its bells to.
    "Channel.create_publish_batch": "(self, max_size)",
    "Channel._disconnect_pools": "(self)",
    "Transport._deliver": "(self, message, queue)",
    "QoS.append": "(self, message, delivery_tag)",
    "QoS.ack": "(self, delivery_tag)",
    "QoS.reject": "(self, delivery_tag, requeue=False)",
    "QoS.restore_unacked": "(self, client=None)",
}
#: What a channel (and its QoS) sets on itself as it opens, that the transport reads.
INSTANCE = ("Channel._queue_cycle", "Channel._tag_to_queue", "Channel._active_queues", "Channel.brpop_timeout",
            "Channel.connection_errors", "Channel.ResponseError", "Channel.client", "Channel.connection",
            "QoS.channel")  # fmt: skip
#: Class attributes and properties read or set, and the classes subclassed.
ATTRIBUTES = (
    "Channel._in_poll",
    "Channel._brpop_sent_at",
    "Transport.brpop_timeout",
    "Channel.sep",
    "Channel.priority_steps",
    "Channel.unacked_key",
    "Channel.unacked_index_key",
    "Channel.global_keyprefix",
    "Channel.active_queues",
    "Channel.QoS",
    "SentinelChannel.supports_batch_publish",
    "Transport.Channel",
    "Transport.can_parse_url",
    "SentinelTransport.Channel",
    "SentinelChannel",
    "SentinelTransport",
    "Transport",
    "Empty",
)


class UnsupportedKombu(ConfigError):
    """The installed kombu lacks a name the broker transport relies on, or has it with other parameters."""


def mismatches(module: ModuleType | Any) -> list[str]:
    """What of ``METHODS`` and ``ATTRIBUTES`` ``module`` (kombu's ``kombu.transport.redis``) lacks or has
    otherwise: one line each."""
    found = []
    for dotted in ATTRIBUTES:
        if _lookup(module, dotted) is _MISSING:
            found.append(f"{dotted} is missing")
    for dotted, expected in METHODS.items():
        method = _lookup(module, dotted)
        if method is _MISSING:
            found.append(f"{dotted} is missing")
            continue
        actual = _parameters(method)
        if actual != expected:
            found.append(f"{dotted}{actual} is not {dotted}{expected}")
    return found


def check(module: ModuleType | Any) -> None:
    """Raise UnsupportedKombu, in one line, when ``module`` is not the kombu the transport was written for."""
    found = mismatches(module)
    if found:
        import kombu

        raise UnsupportedKombu(
            f"kombu {kombu.__version__} is not one vectorsync's Redis transport supports ({found[0]}"
            f"{f', and {len(found) - 1} more' if len(found) > 1 else ''}): install kombu{SUPPORTED}, "
            f"e.g. pip install 'kombu[redis]{SUPPORTED}'"
        )


_MISSING = object()


def _parameters(method: Any) -> str:
    """``method``'s parameters as ``METHODS`` writes them: names, kinds and defaults, without annotations."""
    try:
        signature = inspect.signature(method)
    except (TypeError, ValueError):
        return "(unknown)"
    plain = [p.replace(annotation=inspect.Parameter.empty) for p in signature.parameters.values()]
    return str(signature.replace(parameters=plain, return_annotation=inspect.Signature.empty))


def _lookup(module: Any, dotted: str) -> Any:
    found = module
    for name in dotted.split("."):
        try:
            found = inspect.getattr_static(found, name)
        except AttributeError:
            return _MISSING
    return found
