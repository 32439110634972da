"""Change capture: triggers on a SQL source write every changed id to an outbox in the same transaction as the
write, whoever makes it, and a relay moves them to the broker.

``sql.py`` holds every statement, ``target.py`` reads what a collection's triggers need from the catalog,
``outbox.py`` installs, inspects and claims, ``relay.py`` sends, ``running.py`` runs relays in threads.
"""

from store.capture.outbox import Change, Installation, Outbox, Pending
from store.capture.relay import Relay, relays_from_settings
from store.capture.running import RelayThreads
from store.capture.sql import Target
from store.capture.target import captured, sql_sources

__all__ = [
    "Change",
    "Installation",
    "Outbox",
    "Pending",
    "Relay",
    "RelayThreads",
    "Target",
    "captured",
    "relays_from_settings",
    "sql_sources",
]
