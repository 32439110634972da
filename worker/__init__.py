"""vectorsync workers: the Celery app, the indexing pipeline, the chunker and the sources.

``celery -A worker worker`` finds ``app`` here.
"""

from worker.celery import app

__all__ = ["app"]
