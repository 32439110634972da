"""The ``vectorsync`` command: one module per command, named for it; ``app`` builds the Typer app from them.

``reindex``, ``index``, ``reconcile``, ``search``, ``ask``, ``status``, ``doctor``, ``failures``, ``init``,
``migrate``, ``collections`` (the group) and ``dev/`` hold the commands; ``console`` turns errors into one line
and opens the producer or the collections, ``progress`` follows runs.
"""

from producer.cli.app import app, main

__all__ = ["app", "main"]
