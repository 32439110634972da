"""Broker plumbing shared by producers and workers: the Celery configuration, the coalescing marks of
queued records, and what the broker holds (queues, workers). The task contract is ``store.contract``."""
