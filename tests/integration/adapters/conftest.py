"""Django for the adapter tests, configured in this process from the test project's settings module.

``settings.configure`` rather than DJANGO_SETTINGS_MODULE: that variable would reach every child process
the suite starts, and Celery turns on its Django fix-up in any worker that sees it, so workers of other
tests would load Django. pytest-django then creates its test database on the session's PostgreSQL.
"""

from __future__ import annotations

import urllib.parse

import pytest

from tests.integration.adapters.django_project import settings as project

PROJECT_SETTINGS = "tests.integration.adapters.django_project.settings"


def pytest_configure(config: pytest.Config) -> None:
    import django
    from django.conf import settings

    if not settings.configured:
        settings.configure(**{name: value for name, value in vars(project).items() if name.isupper()})
        django.setup()


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix: None, postgres_url: str) -> None:
    """The test database on the session's PostgreSQL (pytest-django names it ``test_`` + its NAME)."""
    from django.conf import settings

    settings.DATABASES["default"].update(project.database(postgres_url))


def database_url(postgres_url: str, name: str) -> str:
    """``postgres_url`` at the database ``name`` (the test database Django made)."""
    parts = urllib.parse.urlsplit(postgres_url)
    return urllib.parse.urlunsplit(parts._replace(path=f"/{name}"))
