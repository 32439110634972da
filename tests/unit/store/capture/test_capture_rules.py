"""Change capture's pure rules: how a claim is coalesced, which columns a ``where`` reads, what the settings
refuse, the DDL's quoting and the reconcile interval of a captured collection."""

from __future__ import annotations

import pytest

from store.broker.config import beat_schedule
from store.capture import Change, Target
from store.capture.relay import plan
from store.capture.sql import install_ddl, quote, remove_ddl
from store.capture.target import captured, sql_sources, where_columns
from store.errors import ConfigError
from store.settings import Settings


def change(
    seq: int, collection: str, record_id: str | None, truncated: bool = False, at: float | None = None
) -> Change:
    return Change(seq, collection, record_id, truncated, at)


def test_each_id_is_sent_with_its_oldest_changes_time_an_unknown_time_with_none() -> None:
    work = plan(
        [change(1, "a", "3", at=20.0), change(2, "a", "1"), change(3, "a", "3", at=10.0), change(4, "b", "1", at=5.0)]
    )
    assert work.ids == {"a": ["3", "1"], "b": ["1"]}
    assert work.changed_at == {"a": {"3": 10.0}, "b": {"1": 5.0}}


def test_a_claim_is_coalesced_per_collection_in_first_change_order() -> None:
    work = plan([change(1, "a", "3"), change(2, "b", "1"), change(3, "a", "1"), change(4, "a", "3")])
    assert work.ids == {"a": ["3", "1"], "b": ["1"]} and work.truncated == set()


def test_a_truncate_reindexes_its_collection_and_its_ids_are_sent_too() -> None:
    # The full reindex trusts updated_at stamps: a row put back after the TRUNCATE (a reload) with its own
    # stamp and new contents would not be read by it, so the claim's ids go as well.
    work = plan([change(1, "a", "3"), change(2, "a", None, True), change(3, "a", "9"), change(4, "b", "1")])
    assert work.truncated == {"a"} and work.ids == {"a": ["3", "9"], "b": ["1"]}


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


def sql_collection(**source: object) -> dict[str, object]:
    return {"source": {"kind": "sql", "url": "postgresql://db/app", "table": "notes", "text": "{body}", **source}}


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


def test_a_captured_collection_reconciles_on_its_own_longer_interval() -> None:
    settings = Settings(collections={"a": sql_collection(capture="trigger"), "b": sql_collection()})
    schedule = beat_schedule(settings)
    assert schedule["reconcile-a"]["schedule"] == 86_400.0 and schedule["reconcile-b"]["schedule"] == 3600.0
    off = Settings(collections={"a": sql_collection(capture="trigger")}, capture={"reconcile_seconds": 0})
    assert "reconcile-a" not in beat_schedule(off)


def test_each_collection_is_verified_by_sample_every_verify_seconds_unless_off() -> None:
    from store.contract import BULK_QUEUE, VERIFY

    schedule = beat_schedule(Settings(collections={"a": sql_collection(), "b": sql_collection(capture="trigger")}))
    for name in ("a", "b"):
        assert schedule[f"verify-{name}"] == {
            "task": VERIFY,
            "schedule": 86_400.0,
            "args": (name,),
            "options": {"queue": BULK_QUEUE},
        }
    off = Settings(collections={"a": sql_collection()}, worker={"verify_seconds": 0})
    assert [key for key in beat_schedule(off) if key.startswith("verify-")] == []


def test_identifiers_in_the_ddl_are_quoted_as_postgresql_reads_them() -> None:
    assert quote('we"ird') == '"we""ird"'
    target = Target(collection="notes", schema="public", table='Odd"Table', id="Id", compared=("body",), notify=False)
    ddl = "\n".join(install_ddl(target))
    assert '"public"."Odd""Table"' in ddl and 'n."Id"::text' in ddl and "pg_notify" not in ddl
    assert len(remove_ddl(target)) == 5  # four triggers and the function; the outbox stays


def test_a_target_of_a_non_sql_collection_is_refused() -> None:
    from store.capture.target import read_target
    from store.settings import SourceSettings

    with pytest.raises(ConfigError, match="follows SQL sources only"):
        read_target("n", SourceSettings(kind="push"), None)  # type: ignore[arg-type]


def test_a_pushed_collection_is_swept_only_where_a_redis_keeps_its_pushes() -> None:
    """Its sweep sends again the pushes no worker took (store.broker.pushes), which a Redis keeps."""
    pushed = {"d": {"source": {"kind": "push"}}}
    assert beat_schedule(Settings(collections=pushed))["reconcile-d"]["schedule"] == 3600.0
    rabbit = Settings(collections=pushed, broker={"url": "amqp://guest@localhost//"})
    assert beat_schedule(rabbit) == {}  # nor verified: its verdict would have no Redis to be kept in
