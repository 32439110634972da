"""vectorsync workers: the Celery app (``worker.runtime.app``), its tasks (``worker.tasks``), the indexing
pipeline (``worker.pipeline``) and the sources it reads (``worker.sources``).

``celery -A worker worker`` finds ``app`` here.
"""

from worker.runtime.app import app

__all__ = ["app"]
