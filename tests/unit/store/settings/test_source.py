"""``[collections.NAME.source]``: an id field is for pushed documents, and capture needs a SQL source on
PostgreSQL; each refusal says what to do instead."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from store.settings.source import FIELD_PATTERN, SourceSettings

PG = "postgresql+psycopg://app@db/crm"


def test_a_pushed_document_s_id_may_come_from_a_metadata_field_and_only_then() -> None:
    assert SourceSettings(kind="push", id_field="doc.id").id_field == "doc.id"
    with pytest.raises(ValidationError, match=r"a sql source's ids come from source.id: remove id_field"):
        SourceSettings(kind="sql", url=PG, id_field="doc_id")
    with pytest.raises(ValidationError, match=r"a python source's ids come from its loader"):
        SourceSettings(kind="python", id_field="doc_id")


def test_trigger_capture_needs_a_postgresql_source() -> None:
    assert SourceSettings(kind="sql", url=PG, capture="trigger").capture == "trigger"
    for kind, url, where in (("sql", "mysql://app@db/crm", "a mysql database"), ("push", None, "a push source")):
        with pytest.raises(ValidationError, match=f"needs a SQL source on PostgreSQL, not {where}"):
            SourceSettings(kind=kind, url=url, capture="trigger")  # type: ignore[arg-type]


def test_a_field_name_is_letters_digits_and_underscores_dotted() -> None:
    assert all(re.match(FIELD_PATTERN, name) for name in ("owner_id", "owner.id", "_x.y2"))
    assert not any(re.match(FIELD_PATTERN, name) for name in ("owner id", "owner..id", "2x", ".a", "a."))
