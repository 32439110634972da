"""The state database: its SQL helpers (``sql``), its tables (``tables``), opening it at the current schema
(``database``, with the Alembic revisions in ``migrations``), the ledger (entries, locks, runs, failures) and
the generations registry (which physical collection a collection's name reads and writes)."""
