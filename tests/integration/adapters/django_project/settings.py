"""The test project's settings: the database and the vectorsync settings file come from the environment
(``DJANGO_TEST_DATABASE_URL``, ``DJANGO_TEST_VECTORSYNC_CONFIG``), which the tests set for ``manage.py``;
in the pytest process ``conftest.py`` points the database at the session's PostgreSQL."""

from __future__ import annotations

import os
import urllib.parse
from typing import Any


def database(url: str) -> dict[str, Any]:
    """Django's DATABASES entry for a ``postgresql://`` URL (a ``?host=`` folder is a Unix socket's)."""
    parts = urllib.parse.urlsplit(url)
    query = dict(urllib.parse.parse_qsl(parts.query))
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": parts.path.lstrip("/"),
        "USER": parts.username or "",
        "PASSWORD": urllib.parse.unquote(parts.password or ""),
        "HOST": query.get("host", parts.hostname or ""),
        "PORT": str(parts.port or ""),
    }


SECRET_KEY = "tests only"
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
INSTALLED_APPS = ["producer.django", "tests.integration.adapters.django_project.notes"]
DATABASES = {"default": database(os.environ.get("DJANGO_TEST_DATABASE_URL", "postgresql://postgres@/postgres"))}
VECTORSYNC = {
    "CONFIG": os.environ.get("DJANGO_TEST_VECTORSYNC_CONFIG"),
    "MODELS": {"notes.Note": "django_notes"},  # Ticket is declared with the decorator instead
}
