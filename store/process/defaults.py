"""One default client per process (``default_client``), and its producer (``default_producer``).

``store.query``'s functions and ``producer``'s are helpers over this process's default client, built from
``load_settings()`` on first use, as ``httpx.get`` is over a Client. Tests and in-process harnesses build a
client over memory parts and make it the default with ``use_client``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Generic, TypeVar

from store.client import Client

if TYPE_CHECKING:
    from store.broker.producer import Producer

__all__ = ["ProcessDefault", "default_client", "default_producer", "use_client"]

T = TypeVar("T")


class ProcessDefault(Generic[T]):
    """One ``T`` per process, built by ``build`` on first use; ``use`` puts another in its place (a test's, an
    in-process harness's) and returns the one it replaced, and ``use(None)`` has it built again."""

    def __init__(self, build: Callable[[], T]) -> None:
        self._build = build
        self._value: T | None = None
        self._lock = threading.Lock()

    def get(self) -> T:
        with self._lock:
            if self._value is None:
                self._value = self._build()
            return self._value

    def use(self, value: T | None) -> T | None:
        with self._lock:
            previous, self._value = self._value, value
            return previous


_default: ProcessDefault[Client] = ProcessDefault(Client.from_settings)


def default_client() -> Client:
    """This process's client, built from ``load_settings()`` on first use."""
    return _default.get()


def use_client(client: Client | None) -> Client | None:
    """Make ``client`` the one ``default_client`` returns (None: built again on next use); returns the previous
    one, for the caller to put back or close."""
    return _default.use(client)


def default_producer() -> Producer:
    """The producer of this process's default client, built from ``load_settings()`` on first use."""
    return default_client().producer
