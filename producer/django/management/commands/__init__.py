"""``manage.py vectorsync``."""
