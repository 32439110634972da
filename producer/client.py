"""The producer app code enqueues through: this process's default client's (``store.client``).

``Producer`` itself lives in ``store.broker.producer``, so that ``store.Client`` can hold it.
"""

from __future__ import annotations

from store.broker.producer import Producer, Sender
from store.client import default_client

__all__ = ["Producer", "Sender", "default_producer"]


def default_producer() -> Producer:
    """The producer of this process's default client, built from ``load_settings()`` on first use."""
    return default_client().producer
