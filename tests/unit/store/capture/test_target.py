"""What a collection's capture needs: the columns its condition reads, the collections that ask for it, and the
refusals of a source it cannot follow."""

from __future__ import annotations

import pytest

from store.capture.target import captured, sql_sources, where_columns
from store.errors import ConfigError
from store.settings import Settings


def sql_collection(**source: object) -> dict[str, object]:
    return {"source": {"kind": "sql", "url": "postgresql://db/app", "table": "notes", "text": "{body}", **source}}


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        (None, set()),
        ("status <> 'draft'", {"status"}),
        ("Status <> 'owner' AND \"Mixed\" IS NOT NULL", {"status", "Mixed"}),  # folded, quoted, not in literals
        ("deleted_at IS NULL OR views > 3", {"deleted_at", "views"}),
        ("lower(title) LIKE 'a%'", {"title"}),
    ],
)
def test_where_columns_are_every_column_the_condition_names(where: str | None, expected: set[str]) -> None:
    columns = ["id", "status", "Mixed", "owner", "deleted_at", "views", "title"]
    assert where_columns(where, columns) == expected


def test_capture_on_anything_but_postgresql_is_refused_naming_the_fallback() -> None:
    with pytest.raises(ValueError, match=r"needs a SQL source on PostgreSQL, not a mysql database.*updated_at"):
        Settings(collections={"n": sql_collection(url="mysql://db/app", capture="trigger")})
    with pytest.raises(ValueError, match=r"not a push source"):
        Settings(collections={"n": {"source": {"kind": "push", "capture": "trigger"}}})


def test_captured_collections_are_the_sql_ones_that_ask() -> None:
    settings = Settings(
        collections={
            "a": sql_collection(capture="trigger"),
            "b": sql_collection(),
            "c": sql_collection(url="mysql://db/app"),
            "d": {"source": {"kind": "push"}},
        }
    )
    assert set(sql_sources(settings)) == {"a", "b"} and set(captured(settings)) == {"a"}


def test_a_target_of_a_non_sql_collection_is_refused() -> None:
    from store.capture.target import read_target
    from store.settings import SourceSettings

    with pytest.raises(ConfigError, match="follows SQL sources only"):
        read_target("n", SourceSettings(kind="push"), None)  # type: ignore[arg-type]
