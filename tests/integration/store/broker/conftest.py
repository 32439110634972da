"""The fixtures of tests/integration/store/broker/test_producer.py: a real Redis broker, and the default client's
producer sending to it."""

from tests.integration.sending import broker, sender

__all__ = ["broker", "sender"]
