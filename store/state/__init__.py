"""The state database: its SQL helpers, the ledger (entries, locks, runs, failures) and the generations
registry (which physical collection a collection's name reads and writes)."""
