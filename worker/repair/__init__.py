"""Sweeps and repair: which runs a reconcile sweep yields to, and records read as a worker reads them for
``vectorsync verify``, ``explain`` and ``--plan``."""
