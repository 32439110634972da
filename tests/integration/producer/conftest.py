"""The fixtures of tests/integration/producer/test_sqlalchemy.py: a real Redis broker, and the default client's
producer sending to it."""

from tests.integration.sending import broker, sender

__all__ = ["broker", "sender"]
