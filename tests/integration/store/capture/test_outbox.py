"""The triggers and the outbox on a real PostgreSQL, written to as any other client would (raw SQL): what each
kind of write records, what an UPDATE of an unread column does not, install and remove leaving the catalog
clean, and the refusals that name the table, the column and the fix."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
import sqlalchemy as sa

from store.capture import Outbox, Target
from store.capture.control import report
from store.capture.outbox import Waiting
from store.errors import ConfigError
from store.settings import Settings, SourceSettings
from tests.backends import unique_name


@pytest.fixture
def pg(postgres_url: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        yield conn


@pytest.fixture
def table(pg: psycopg.Connection) -> Iterator[str]:
    name = unique_name("notes")
    pg.execute(
        f"CREATE TABLE {name} (id bigint PRIMARY KEY, title text, body text, owner int, doc json, "
        "status text, views int, updated_at timestamptz DEFAULT now())"
    )
    yield name
    pg.execute(f"DROP TABLE IF EXISTS {name}")


def source(url: str, table: str, **extra: object) -> SourceSettings:
    return SourceSettings(
        kind="sql",
        url=url,
        table=table,
        text="{title}\n{body}",
        metadata=["owner", "doc"],
        where="status <> 'draft'",
        updated_at="updated_at",
        capture="trigger",
        **extra,
    )


@pytest.fixture
def installed(postgres_url: str, table: str) -> Iterator[tuple[Outbox, Target]]:
    outbox = Outbox(postgres_url)
    target = outbox.target(table, source(postgres_url, table))
    outbox.enable(target)
    yield outbox, target
    outbox.disable(target)
    with outbox.engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM vectorsync_outbox WHERE collection = :c"), {"c": table})
    outbox.close()


def recorded(pg: psycopg.Connection, collection: str) -> list[tuple[str | None, bool]]:
    rows = pg.execute(
        "SELECT record_id, truncated FROM vectorsync_outbox WHERE collection = %s ORDER BY seq", (collection,)
    ).fetchall()
    return [(r, t) for r, t in rows]


def test_each_kind_of_write_records_the_ids_it_changed(
    pg: psycopg.Connection, table: str, installed: tuple[Outbox, Target]
) -> None:
    pg.execute(
        f"INSERT INTO {table} (id, title, body, owner, doc, status) "
        "SELECT g, 'title ' || g, 'body', 1, '{}', 'ok' FROM generate_series(1, 5) g"
    )
    assert recorded(pg, table) == [(str(i), False) for i in range(1, 6)]
    pg.execute(f"DELETE FROM vectorsync_outbox WHERE collection = '{table}'")

    pg.execute(f"UPDATE {table} SET views = 7, updated_at = now()")  # columns nothing reads
    assert recorded(pg, table) == []
    pg.execute(f"UPDATE {table} SET body = 'new body' WHERE id = 2")  # leaves updated_at alone
    pg.execute(f"UPDATE {table} SET status = 'draft' WHERE id = 3")  # leaves the where: its chunks must go
    pg.execute(f"UPDATE {table} SET doc = '{{\"a\": 1}}' WHERE id = 5")  # json: no equality operator
    pg.execute(f"UPDATE {table} SET id = 10 WHERE id = 4")  # a key change: the old id and the new one
    pg.execute(f"DELETE FROM {table} WHERE id = 1")
    assert recorded(pg, table) == [("2", False), ("3", False), ("5", False), ("10", False), ("4", False), ("1", False)]
    pg.execute(f"TRUNCATE {table}")
    assert recorded(pg, table)[-1] == (None, True)


def test_a_bulk_update_records_every_row_in_one_statement(
    pg: psycopg.Connection, table: str, installed: tuple[Outbox, Target]
) -> None:
    pg.execute(f"INSERT INTO {table} (id, title, status) SELECT g, 't', 'ok' FROM generate_series(1, 20000) g")
    pg.execute(f"DELETE FROM vectorsync_outbox WHERE collection = '{table}'")
    pg.execute(f"UPDATE {table} SET title = title || ' edited' WHERE id % 2 = 0")
    assert len(recorded(pg, table)) == 10_000


def test_a_writer_without_rights_on_the_outbox_still_records(
    pg: psycopg.Connection, postgres_url: str, table: str, installed: tuple[Outbox, Target]
) -> None:
    role = unique_name("writer")
    pg.execute(f"CREATE ROLE {role} LOGIN")
    try:
        pg.execute(f"GRANT INSERT, UPDATE ON {table} TO {role}")
        with psycopg.connect(postgres_url, user=role, autocommit=True) as writer:
            writer.execute(f"INSERT INTO {table} (id, title, status) VALUES (1, 'by another service', 'ok')")
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                writer.execute("SELECT count(*) FROM vectorsync_outbox")
        assert recorded(pg, table) == [("1", False)]
    finally:
        pg.execute(f"DROP OWNED BY {role}")
        pg.execute(f"DROP ROLE {role}")


def test_enable_is_idempotent_and_disable_leaves_no_trigger_or_function_but_keeps_pending_rows(
    pg: psycopg.Connection, postgres_url: str, table: str
) -> None:
    outbox = Outbox(postgres_url)
    target = outbox.target(table, source(postgres_url, table))
    try:
        outbox.enable(target)
        outbox.enable(target)
        assert outbox.installed(target).complete
        pg.execute(f"INSERT INTO {table} (id, title, status) VALUES (1, 'kept', 'ok')")
        outbox.disable(target)
        assert outbox.installed(target).absent
        oid = pg.execute("SELECT to_regclass(%s)::oid", (table,)).fetchone()
        assert oid is not None
        triggers = pg.execute(
            "SELECT count(*) FROM pg_trigger WHERE tgrelid = %s AND NOT tgisinternal", (oid[0],)
        ).fetchone()
        functions = pg.execute("SELECT count(*) FROM pg_proc WHERE proname = %s", (target.function,)).fetchone()
        assert triggers == (0,) and functions == (0,)
        pg.execute(f"INSERT INTO {table} (id, title, status) VALUES (2, 'not recorded', 'ok')")
        assert recorded(pg, table) == [("1", False)]  # pending changes stay until drained
    finally:
        pg.execute(f"DELETE FROM vectorsync_outbox WHERE collection = '{table}'")
        outbox.close()


def test_the_printed_ddl_run_by_hand_installs_the_same_capture(
    pg: psycopg.Connection, postgres_url: str, table: str
) -> None:
    from store.capture.sql import install_ddl, remove_ddl

    outbox = Outbox(postgres_url)
    target = outbox.target(table, source(postgres_url, table))
    try:
        with pg.transaction():
            for statement in install_ddl(target):
                pg.execute(statement)  # type: ignore[call-overload]
        assert outbox.installed(target).complete
        for statement in remove_ddl(target):
            pg.execute(statement)  # type: ignore[call-overload]
        assert outbox.installed(target).absent
    finally:
        outbox.close()


def test_refusals_name_the_table_the_column_and_the_fix(pg: psycopg.Connection, postgres_url: str) -> None:
    name = unique_name("nokey")
    pg.execute(f"CREATE TABLE {name} (id int, code date, title text)")
    outbox = Outbox(postgres_url)
    try:
        with pytest.raises(
            ConfigError,
            match=rf"column 'id' of table '{name}' is neither the primary key.*"
            rf"ADD PRIMARY KEY \(\"id\"\)",
        ):
            outbox.target(
                name, SourceSettings(kind="sql", url=postgres_url, table=name, text="{title}", capture="trigger")
            )
        pg.execute(f"CREATE UNIQUE INDEX ON {name} (code)")
        with pytest.raises(ConfigError, match=r"column 'code' .* has type DATE.*integer, text or uuid"):
            outbox.target(
                name,
                SourceSettings(kind="sql", url=postgres_url, table=name, id="code", text="{title}", capture="trigger"),
            )
        with pytest.raises(ConfigError, match=r"table 'missing_table' does not exist"):
            outbox.target(
                "x",
                SourceSettings(kind="sql", url=postgres_url, table="missing_table", text="{title}", capture="trigger"),
            )
    finally:
        pg.execute(f"DROP TABLE {name}")
        outbox.close()


def test_a_role_that_may_not_create_triggers_is_told_what_to_run(
    pg: psycopg.Connection, postgres_url: str, table: str
) -> None:
    role = unique_name("reader")
    pg.execute(f"CREATE ROLE {role} LOGIN")
    pg.execute(f"GRANT SELECT ON {table} TO {role}")
    pg.execute(f"GRANT CREATE ON SCHEMA public TO {role}")
    url = sa.engine.make_url(postgres_url).set(username=role).render_as_string(hide_password=False)
    outbox = Outbox(url)
    try:
        target = outbox.target(table, source(url, table))
        with pytest.raises(
            ConfigError,
            match=rf"may not create triggers on table '{table}'.*"
            rf"`vectorsync capture sql {table}`",
        ):
            outbox.enable(target)
    finally:
        outbox.close()
        pg.execute(f"DROP OWNED BY {role}")
        pg.execute(f"DROP ROLE {role}")


def test_rows_of_a_collection_no_longer_declared_are_reported_and_kept(
    pg: psycopg.Connection, postgres_url: str, table: str, installed: tuple[Outbox, Target]
) -> None:
    gone = unique_name("gone")
    pg.execute("INSERT INTO vectorsync_outbox (collection, record_id) VALUES (%s, '1'), (%s, '2')", (gone, gone))
    try:
        settings = Settings(collections={table: {"source": source(postgres_url, table).model_dump()}})
        states = {s.collection: s for s in report(settings)}
        assert states[table].problem is None and states[table].installation is not None
        orphan = states[gone]
        assert (orphan.declared, orphan.pending) == (False, 2)
        assert (
            orphan.problem is not None
            and f"DELETE FROM vectorsync_outbox WHERE collection = '{gone}'" in orphan.problem
        )
        assert len(recorded(pg, gone)) == 2
    finally:
        pg.execute("DELETE FROM vectorsync_outbox WHERE collection = %s", (gone,))


def test_the_outbox_is_where_the_roles_schema_is_even_for_a_table_in_another(
    pg: psycopg.Connection, postgres_url: str, table: str
) -> None:
    schema = unique_name("own")
    pg.execute(f"CREATE SCHEMA {schema}")
    url = (
        sa.engine.make_url(postgres_url)
        .update_query_dict({"options": f"-csearch_path={schema},public"})
        .render_as_string(hide_password=False)
    )
    outbox = Outbox(url)
    try:
        target = outbox.target(table, source(url, table))
        assert (target.schema, target.outbox_schema) == ("public", schema)
        outbox.enable(target)
        pg.execute(f"INSERT INTO {table} (id, title, status) VALUES (1, 'in public', 'ok')")
        assert [(p.collection, p.rows) for p in outbox.pending()] == [(table, 1)]
        with outbox.claim([table], 10) as changes:
            assert [c.record_id for c in changes] == ["1"]
        assert outbox.pending() == []
        outbox.disable(target)
    finally:
        outbox.close()
        pg.execute(f"DROP SCHEMA {schema} CASCADE")


def test_nobody_but_its_owner_can_attach_the_capture_function_to_another_table(
    pg: psycopg.Connection, postgres_url: str, table: str, installed: tuple[Outbox, Target]
) -> None:
    """Issue 32, defect 2: the SECURITY DEFINER function was executable by PUBLIC, so a role with no right on the
    outbox could attach it to a table of its own and write forged ids, or a TRUNCATE marker, into the outbox."""
    _, target = installed
    function = f'"{target.schema}"."{target.function}"'
    role, schema = unique_name("intruder"), unique_name("own")
    pg.execute(f"CREATE ROLE {role} LOGIN")
    pg.execute(f"CREATE SCHEMA {schema} AUTHORIZATION {role}")
    try:
        with psycopg.connect(postgres_url, user=role, autocommit=True) as intruder:
            intruder.execute(f"CREATE TABLE {schema}.forged (id bigint PRIMARY KEY)")
            for event in ("TRUNCATE", "INSERT"):
                referencing = "REFERENCING NEW TABLE AS vectorsync_new " if event == "INSERT" else ""
                with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied for function"):
                    intruder.execute(
                        f"CREATE TRIGGER forge AFTER {event} ON {schema}.forged {referencing}"
                        f"FOR EACH STATEMENT EXECUTE FUNCTION {function}()"
                    )
        # Its owner could attach it elsewhere by mistake: the function refuses to record another table.
        pg.execute(f"CREATE TABLE {schema}.other (id bigint PRIMARY KEY)")
        pg.execute(
            f"CREATE TRIGGER misplaced AFTER TRUNCATE ON {schema}.other FOR EACH STATEMENT "
            f"EXECUTE FUNCTION {function}()"
        )
        with pytest.raises(psycopg.errors.RaiseException, match=f'records the changes of "public"."{table}" only'):
            pg.execute(f"TRUNCATE {schema}.other")
        assert recorded(pg, table) == []
        pg.execute(f"INSERT INTO {table} (id, title, status) VALUES (1, 'its own table still records', 'ok')")
        assert recorded(pg, table) == [("1", False)]
    finally:
        pg.execute(f"DROP SCHEMA {schema} CASCADE")
        pg.execute(f"DROP OWNED BY {role}")
        pg.execute(f"DROP ROLE {role}")


def test_waiting_counts_the_rows_that_will_reindex_one_record(
    pg: psycopg.Connection, table: str, installed: tuple[Outbox, Target]
) -> None:
    outbox, _ = installed
    assert outbox.waiting(table, "1") == Waiting(0, None)
    pg.execute(f"INSERT INTO {table} (id, title, status) VALUES (1, 'one', 'ok'), (2, 'two', 'ok')")
    pg.execute(f"UPDATE {table} SET title = 'one again' WHERE id = 1")
    first = outbox.waiting(table, "1")
    assert first.rows == 2 and first.since is not None
    assert outbox.waiting(table, "2").rows == 1
    assert outbox.waiting(table, "3").rows == 0
    pg.execute(f"TRUNCATE {table}")  # a TRUNCATE reindexes every record
    assert outbox.waiting(table, "3").rows == 1
