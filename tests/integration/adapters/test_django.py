"""The Django app against real PostgreSQL (pytest-django's test database) and a real celery worker.

Models of the test project (``django_project/``) are saved through the ORM; the worker, which has no Django,
reads their table as a SQL source. ``transaction=True`` tests commit for real, as an app does (a test
inside a rolled-back transaction would never run ``on_commit``).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from django.db import connection, transaction

from store.client import Client
from store.contract import INDEX_RECORD, LIVE_QUEUE
from store.process.defaults import use_client
from store.settings import load_settings
from tests.integration.adapters.conftest import PROJECT_SETTINGS, database_url
from tests.integration.adapters.django_project.notes.models import Note, Ticket
from tests.settings_files import worker_sections
from tests.workers import ROOT, celery_worker, child_env, wait_for

# One xdist worker for the module: its tests share one celery worker (and one test database).
pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.xdist_group("django")]

MANAGE_PY = Path(__file__).parent / "django_project" / "manage.py"


def settings_toml(*, broker: str, database: str, source: str) -> str:
    """The project's vectorsync.toml: both models' tables as SQL sources, the fake model, pgvector."""

    def collection(name: str, table: str, text: str, extra: str = "") -> str:
        return (
            f'[collections.{name}.source]\nkind = "sql"\nurl = "{source}"\ntable = "{table}"\n'
            f'text = "{text}"\n{extra}\n'
        )

    return (
        worker_sections(broker=broker, database=database, dimensions=64, max_retries=1, retry_delay=0.2)
        + "[embeddings]\ncache_ttl_days = 0\n\n"
        + collection(
            "django_notes", "notes_note", "{title}\\n\\n{body}", 'metadata = ["kind"]\nupdated_at = "updated_at"\n'
        )
        + collection("django_tickets", "notes_ticket", "{subject}\\n\\n{body}")
    )


@pytest.fixture(scope="module")
def config(
    tmp_path_factory: pytest.TempPathFactory, django_db_setup: None, broker_redis_url: str, postgres_url: str
) -> Path:
    """The settings file, its sources in the test database pytest-django made."""
    redis.Redis.from_url(broker_redis_url).flushdb()
    test_database = connection.settings_dict["NAME"]
    path = tmp_path_factory.mktemp("django") / "vectorsync.toml"
    path.write_text(
        settings_toml(broker=broker_redis_url, database=postgres_url, source=database_url(postgres_url, test_database))
    )
    return path


@pytest.fixture(scope="module")
def worker(config: Path) -> Iterator[None]:
    with celery_worker(config, concurrency=1, name="django"):
        yield


@pytest.fixture
def client(config: Path) -> Iterator[Client]:
    """The process's default client over the settings file: what the signal handlers send with."""
    client = Client(load_settings(config))
    previous = use_client(client)
    yield client
    use_client(previous)
    client.close()


def chunks_of(client: Client, collection: str, record_id: object, query: str) -> list[str]:
    matches = client.search(collection, query, filter={"record_id": str(record_id)}, limit=10)
    return [m.text for m in matches]


def test_a_note_saved_through_the_orm_is_searchable(worker: None, client: Client) -> None:
    note = Note.objects.create(title="Dana's onboarding", body="Dana asked to move the onboarding call", kind="call")
    Note.objects.create(title="Invoice", body="The invoice for March is overdue", kind="email")
    wait_for(
        lambda: chunks_of(client, "django_notes", note.pk, "onboarding"),
        timeout=60,
        what="the saved note to be indexed",
    )
    best = client.search("django_notes", "move the onboarding call", filter={"kind": "call"}, limit=1)[0]
    assert best.metadata["record_id"] == str(note.pk)
    assert best.text == "Dana's onboarding\n\nDana asked to move the onboarding call"

    note.body = "Dana confirmed the rollout meeting"
    note.save()
    wait_for(
        lambda: "rollout" in " ".join(chunks_of(client, "django_notes", note.pk, "rollout")),
        timeout=60,
        what="the edited note to be indexed again",
    )


def test_a_model_declared_with_the_decorator_is_indexed(worker: None, client: Client) -> None:
    ticket = Ticket.objects.create(subject="Login fails", body="The SSO login fails after the password reset")
    wait_for(
        lambda: chunks_of(client, "django_tickets", ticket.pk, "login"),
        timeout=60,
        what="the saved ticket to be indexed",
    )


def test_a_delete_removes_its_chunks(worker: None, client: Client) -> None:
    note = Note.objects.create(title="Pricing", body="The discount on the renewal is ten percent", kind="email")
    wait_for(lambda: chunks_of(client, "django_notes", note.pk, "discount"), timeout=60, what="the note indexed")
    note_id = note.pk
    note.delete()
    wait_for(
        lambda: not chunks_of(client, "django_notes", note_id, "discount"),
        timeout=60,
        what="the deleted note's chunks to go",
    )

    other = Note.objects.create(title="Renewal", body="The renewal call is on Monday", kind="call")
    wait_for(lambda: chunks_of(client, "django_notes", other.pk, "renewal"), timeout=60, what="the note indexed")
    Note.objects.filter(title="Renewal").delete()  # a queryset's delete sends post_delete for each row too
    wait_for(
        lambda: not chunks_of(client, "django_notes", other.pk, "renewal"),
        timeout=60,
        what="the chunks of the queryset's rows to go",
    )


@pytest.fixture
def unconsumed(scratch_redis_url: str, config: Path) -> Iterator[redis.Redis]:
    """A broker database no worker reads, made the default client's: what the app sent stays there."""
    broker = redis.Redis.from_url(scratch_redis_url)
    broker.flushdb()
    settings = load_settings(config)
    broker_settings = settings.broker.model_copy(update={"url": scratch_redis_url})
    client = Client(settings.model_copy(update={"broker": broker_settings}))
    previous = use_client(client)
    yield broker
    use_client(previous)
    client.close()
    broker.flushdb()


def sent(broker: redis.Redis) -> list[list[object]]:
    """The ``index_record`` arguments waiting on the live queue, oldest first."""
    messages = [json.loads(raw) for raw in reversed(broker.lrange(LIVE_QUEUE, 0, -1))]
    assert {m["headers"]["task"] for m in messages} <= {INDEX_RECORD}
    return [json.loads(base64.b64decode(m["body"]))[0] for m in messages]


def test_a_save_inside_a_rolled_back_transaction_enqueues_nothing(unconsumed: redis.Redis) -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        Note.objects.create(title="Draft", body="never committed")
        raise RuntimeError("the view failed")
    assert Note.objects.count() == 0
    assert sent(unconsumed) == []

    with transaction.atomic():
        kept = Note.objects.create(title="Kept", body="committed")
        assert sent(unconsumed) == []  # not before the commit
        try:
            with transaction.atomic():  # a savepoint, rolled back: only what it saved is dropped
                Note.objects.create(title="Dropped", body="rolled back with its savepoint")
                raise RuntimeError
        except RuntimeError:
            pass
    assert sent(unconsumed) == [["django_notes", str(kept.pk)]]

    other = Note.objects.create(title="Autocommit", body="no transaction: sent at once")
    assert sent(unconsumed)[-1] == ["django_notes", str(other.pk)]


def manage(config: Path, postgres_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``python manage.py ARGS`` in the test project, its vectorsync settings file named by its Django
    settings only (no VECTORSYNC_CONFIG)."""
    env = child_env() | {
        "DJANGO_TEST_VECTORSYNC_CONFIG": str(config),
        "DJANGO_TEST_DATABASE_URL": postgres_url,
        "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }
    env.pop("DJANGO_SETTINGS_MODULE", None)
    return subprocess.run(
        [sys.executable, str(MANAGE_PY), *args],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_manage_py_vectorsync_reindex_indexes_rows_written_without_signals(
    worker: None, client: Client, config: Path, postgres_url: str
) -> None:
    rows = Note.objects.bulk_create(
        [Note(title=f"Bulk {i}", body=f"imported budget review number {i}", kind="import") for i in range(30)]
    )  # bulk_create sends no post_save
    result = manage(config, postgres_url, "vectorsync", "reindex", "django_notes", "--wait")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 failed" in result.stdout
    found = client.search("django_notes", "imported budget review", filter={"kind": "import"}, limit=50)
    assert {m.metadata["record_id"] for m in found} == {str(row.pk) for row in rows}


def test_manage_py_vectorsync_passes_every_argument_and_the_exit_code(config: Path, postgres_url: str) -> None:
    help_text = manage(config, postgres_url, "vectorsync", "--help")
    assert help_text.returncode == 0, help_text.stderr
    assert "manage.py vectorsync" in help_text.stdout and "reindex" in help_text.stdout
    wrong = manage(config, postgres_url, "vectorsync", f"--settings={PROJECT_SETTINGS}", "search", "no_such", "x")
    assert wrong.returncode == 2
    assert "collection 'no_such' does not exist" in wrong.stderr
