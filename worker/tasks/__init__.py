"""The Celery tasks and their way through a batch: each task module registers its tasks with the app when
imported, and the app imports this package (``include``), so a worker knows every task by its name."""

from worker.tasks import indexing, lane, reconcile, reindex, verify

__all__ = ["indexing", "lane", "reconcile", "reindex", "verify"]
