"""What the DDL grants, without a database: the relaying role may claim and delete the outbox's rows whoever
owns them (a DBA who ran ``capture sql``), and the function's source is what ``Outbox.current`` compares."""

from __future__ import annotations

from store.capture.sql import Target, function_source, install_ddl


def test_the_ddl_grants_the_relaying_role_its_outbox_and_the_function_source_is_what_it_installs() -> None:
    target = Target("notes", "public", "crm", "id", ("title", "body"), relay_role='app "reader"')
    statements = install_ddl(target)
    assert 'GRANT SELECT, UPDATE, DELETE ON "public".vectorsync_outbox TO "app ""reader"""' in statements
    assert any(f"$vectorsync${function_source(target)}$vectorsync$" in s for s in statements)
    unnamed = Target("notes", "public", "crm", "id", ("title",))
    assert not any(s.startswith("GRANT") for s in install_ddl(unnamed))
