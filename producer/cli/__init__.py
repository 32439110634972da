"""The ``vectorsync`` command: reindex with progress, index, search, status, failures, collections, dev.

``app`` holds the commands, ``progress`` follows runs, ``console`` turns errors
into one line; ``dev`` runs the whole system on this machine for a first try.
"""

from producer.cli.app import app, main

__all__ = ["app", "main"]
