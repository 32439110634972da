"""Capture's DDL, without a database: identifiers quoted as PostgreSQL reads them, what it grants (the relaying
role may claim and delete the outbox's rows whoever owns them, a DBA who ran ``capture sql``), and the function's
source is what ``Outbox.current`` compares."""

from __future__ import annotations

from store.capture.sql import Target, function_source, install_ddl, quote, remove_ddl


def test_the_ddl_grants_the_relaying_role_its_outbox_and_the_function_source_is_what_it_installs() -> None:
    target = Target("notes", "public", "crm", "id", ("title", "body"), relay_role='app "reader"')
    statements = install_ddl(target)
    assert 'GRANT SELECT, UPDATE, DELETE ON "public".vectorsync_outbox TO "app ""reader"""' in statements
    assert any(f"$vectorsync${function_source(target)}$vectorsync$" in s for s in statements)
    unnamed = Target("notes", "public", "crm", "id", ("title",))
    assert not any(s.startswith("GRANT") for s in install_ddl(unnamed))


def test_identifiers_in_the_ddl_are_quoted_as_postgresql_reads_them() -> None:
    assert quote('we"ird') == '"we""ird"'
    target = Target(collection="notes", schema="public", table='Odd"Table', id="Id", compared=("body",), notify=False)
    ddl = "\n".join(install_ddl(target))
    assert '"public"."Odd""Table"' in ddl and 'n."Id"::text' in ddl and "pg_notify" not in ddl
    assert len(remove_ddl(target)) == 5  # four triggers and the function; the outbox stays
