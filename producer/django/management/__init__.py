"""Django's management commands of the app: ``commands/vectorsync.py``."""
