"""Connections to the servers vectorsync talks to, each kind made in one place: PostgreSQL (``postgres``:
engines, transactions, advisory locks, driver errors) and Redis (``redis``: clients and their errors)."""
