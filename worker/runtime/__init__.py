"""A worker's process and pool plumbing: the Celery app and its signals, what one process holds, the prefork
pool, the event heartbeat, Flower, and the capture relays of the main process."""
