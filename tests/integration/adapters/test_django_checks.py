"""The app's own checks (``manage.py check``), ``watch``'s refusals and ``call_command("vectorsync", ...)``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError, call_command
from django.db import models

from producer.django import indexed, watch
from producer.django.checks import TAG
from producer.django.management.commands.vectorsync import without_django_options
from store.process.defaults import use_client
from tests.integration.adapters.django_project.notes.models import Note, Ticket

NOTES_SOURCE = '[collections.django_notes.source]\nkind = "sql"\nurl = "postgresql://app@db/crm"\n'
TICKETS = (
    '[collections.django_tickets.source]\nkind = "sql"\nurl = "postgresql://app@db/crm"\n'
    'table = "notes_ticket"\ntext = "{subject}\\n\\n{body}"\n'
)


@pytest.fixture
def settings_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_vectorsync_env: None) -> Iterator[Path]:
    """The file VECTORSYNC_CONFIG names, and a default client built from it (not one an earlier test built)."""
    path = tmp_path / "vectorsync.toml"
    monkeypatch.setenv("VECTORSYNC_CONFIG", str(path))
    previous = use_client(None)
    yield path
    built = use_client(previous)
    if built is not None:
        built.close()


def messages(path: Path, toml: str) -> list[tuple[str, str]]:
    path.write_text(toml)
    return [(m.id, m.msg) for m in checks.run_checks(tags=[TAG])]


def test_models_whose_collections_read_their_tables_pass(settings_file: Path) -> None:
    notes = NOTES_SOURCE + 'table = "notes_note"\ntext = "{title}\\n\\n{body}"\nmetadata = ["kind"]\n'
    assert messages(settings_file, notes + TICKETS) == []


def test_each_way_a_collection_misses_its_model_is_an_error_naming_it(settings_file: Path) -> None:
    assert messages(settings_file, TICKETS) == [
        (
            "vectorsync.E002",
            "notes.Note is indexed into 'django_notes', but vectorsync's settings declare no such collection",
        )
    ]
    assert messages(settings_file, TICKETS + '[collections.django_notes.source]\nkind = "push"\n') == [
        (
            "vectorsync.E003",
            "notes.Note is indexed into 'django_notes', but its source is 'push': the worker reads "
            "the model's rows from its table",
        )
    ]
    assert messages(settings_file, TICKETS + NOTES_SOURCE + 'table = "notes"\ntext = "{title}"\n') == [
        (
            "vectorsync.E004",
            "notes.Note is indexed into 'django_notes', but its source table is 'notes', not the model's 'notes_note'",
        )
    ]
    assert messages(settings_file, TICKETS + NOTES_SOURCE + 'table = "notes_note"\nid = "uuid"\ntext = "{t}"\n') == [
        (
            "vectorsync.E005",
            "notes.Note is indexed into 'django_notes', but its source id is 'uuid', not the model's "
            "primary key column 'id'",
        )
    ]
    wrong_columns = 'table = "notes_note"\ntext = "{title}\\n{text}"\nmetadata = ["owner_id"]\n'
    assert messages(settings_file, TICKETS + NOTES_SOURCE + wrong_columns) == [
        (
            "vectorsync.E006",
            "notes.Note is indexed into 'django_notes', but its source names columns 'notes_note' "
            "does not have: text, owner_id",
        )
    ]


def test_the_hint_is_the_source_that_reads_the_table(settings_file: Path) -> None:
    settings_file.write_text(TICKETS)
    [error] = checks.run_checks(tags=[TAG])
    assert error.obj is Note
    assert error.hint == (
        'declare it as\n[collections.django_notes.source]\nkind = "sql"\nurl = "postgresql://USER@HOST/DATABASE"\n'
        'table = "notes_note"\nid = "id"\ntext = "{title}\\n\\n{body}\\n\\n{kind}"\nupdated_at = "updated_at"'
    )


def test_settings_that_cannot_be_read_are_one_error(settings_file: Path) -> None:
    [(code, message)] = messages(settings_file, "[vectors\n")
    assert code == "vectorsync.E001"
    assert message.startswith("vectorsync's settings cannot be read: ")


def test_watch_refuses_what_would_never_index() -> None:
    class Base(models.Model):
        class Meta:
            abstract = True
            app_label = "notes"

    with pytest.raises(
        ImproperlyConfigured,
        match=r"^notes.Base is abstract, so it sends no signals: index the "
        r"models that inherit from it$",
    ):
        indexed("notes")(Base)
    with pytest.raises(ImproperlyConfigured, match=r"^notes.Ticket is indexed into no collection: name one"):
        watch(Ticket, [])
    with pytest.raises(ImproperlyConfigured, match=r"^notes.Ticket: collection name 'Bad Name' is not allowed"):
        watch(Ticket, "Bad Name")


def test_call_command_runs_vectorsync_and_a_failure_is_a_command_error(
    settings_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings_file.write_text('[vectors]\nstore = "memory"\ndimensions = 8\n' + TICKETS)
    call_command("vectorsync", "collections", "list")
    assert "django_tickets" in capsys.readouterr().out
    with pytest.raises(CommandError, match=r"^vectorsync search no_such x exited with 2$"):
        call_command("vectorsync", "search", "no_such", "x")
    assert "collection 'no_such' does not exist" in capsys.readouterr().err
    with pytest.raises(CommandError, match=r"^vectorsync reindex django_tickets --nope: No such option: --nope$"):
        call_command("vectorsync", "reindex", "django_tickets", "--nope")


def test_django_options_are_not_passed_on() -> None:
    args = ["--settings", "proj.settings", "reindex", "--pythonpath=.", "notes", "--wait"]
    assert without_django_options(args) == ["reindex", "notes", "--wait"]
