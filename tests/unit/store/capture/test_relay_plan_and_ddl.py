"""What a claim becomes (``store.capture.relay.plan``) and what the DDL grants, without a database: the two
defects the integration tests found, pinned where they are cheap to see."""

from __future__ import annotations

from store.capture.outbox import Change
from store.capture.relay import plan
from store.capture.sql import Target, function_source, install_ddl


def test_a_truncate_claimed_with_ids_sends_the_ids_too() -> None:
    changes = [Change(1, "notes", None, True), Change(2, "notes", "5", False), Change(3, "notes", "5", False),
               Change(4, "notes", "7", False), Change(5, "other", "1", False)]
    work = plan(changes)
    assert work.truncated == {"notes"}
    # A reload after the TRUNCATE may keep a row's updated_at with new contents: the full reindex, which
    # trusts the stamps, would not read it; the ids are indexed on their own.
    assert work.ids == {"notes": ["5", "7"], "other": ["1"]}


def test_the_ddl_grants_the_relaying_role_its_outbox_and_the_function_source_is_what_it_installs() -> None:
    target = Target("notes", "public", "crm", "id", ("title", "body"), relay_role='app "reader"')
    statements = install_ddl(target)
    assert 'GRANT SELECT, UPDATE, DELETE ON "public".vectorsync_outbox TO "app ""reader"""' in statements
    assert any(f"$vectorsync${function_source(target)}$vectorsync$" in s for s in statements)
    unnamed = Target("notes", "public", "crm", "id", ("title",))
    assert not any(s.startswith("GRANT") for s in install_ddl(unnamed))
