"""The ``vectorsync`` command: one module per command, named for it; ``app`` builds the Typer app from them.

``reindex``, ``index``, ``reconcile``, ``search``, ``ask``, ``status``, ``doctor``, ``failures``, ``init``,
``migrate``, ``collections`` (the group) and ``dev/`` hold the commands; ``console`` turns errors into one line
and opens the producer or the collections, ``progress`` follows runs, ``tables`` lays out what they list.

Every command module is imported to say ``vectorsync --help``, so a module imports at its top only typer, rich,
the CLI's own modules and ``store``'s light ones (``store.contract``, ``store.errors``); the settings, the stores,
Celery, Redis and the drivers are imported inside the function that uses them (``open_producer``, a command's
body). The help starts in about a tenth of a second; tests/unit/producer/cli/test_app.py keeps it so.
"""

from producer.cli.app import app, main

__all__ = ["app", "main"]
