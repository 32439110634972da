"""`vectorsync search --mode` and `vectorsync ask --mode` as a script runs them."""

from __future__ import annotations

from typing import Any

from tests.unit.store.retrieval.test_service import NOTES


def test_search_and_ask_take_a_mode(tmp_path: Any, postgres_url: str) -> None:
    from tests.backends import unique_name
    from tests.crm import store_records
    from tests.settings_files import pushed_collection
    from tests.workers import run_cli

    collection = unique_name("modes")
    config = pushed_collection(tmp_path, postgres_url, collection, dimensions=64, keywords=True)
    store_records(config, collection, [(rid, text, {"tenant": tenant}) for rid, tenant, text in NOTES])

    keyword = run_cli(config, "search", collection, "refunds acme", "--mode", "keyword", "--limit", "2")
    assert keyword.returncode == 0, keyword.stderr
    assert "acme-1:0" in keyword.stdout
    hybrid = run_cli(
        config, "ask", collection, "how are acme refunds paid?", "--mode", "hybrid", "--filter", '{"tenant": "acme"}'
    )
    assert hybrid.returncode == 0, hybrid.stderr
    assert hybrid.stdout.startswith("Refunds at Acme are paid within 14 days")
    bad = run_cli(config, "search", collection, "refunds", "--mode", "fuzzy")
    assert bad.returncode != 0
    assert "search mode 'fuzzy' is not allowed: use one of vector, keyword, hybrid" in bad.stderr


def test_a_filter_on_a_field_no_record_holds_is_warned_of(tmp_path: Any, postgres_url: str) -> None:
    """`--filter '{"owner_id": 7}'` where the records say `owner`: the table stays empty and the exit 0, and a
    warning on stderr names the field; a field the records hold with no matching value is not warned of."""
    from tests.backends import unique_name
    from tests.crm import store_records
    from tests.settings_files import pushed_collection
    from tests.workers import run_cli

    collection = unique_name("unknown")
    config = pushed_collection(tmp_path, postgres_url, collection, dimensions=64)
    store_records(config, collection, [("n1", "renewal call with Acme", {"owner": 7}), ("n2", "pricing", {"owner": 8})])

    unknown = run_cli(config, "search", collection, "renewal", "--filter", '{"owner_id": 7, "owner": 7}')
    assert unknown.returncode == 0, unknown.stderr
    assert "n1:0" not in unknown.stdout
    assert unknown.stderr == (
        f"warning: no record of {collection} holds the field 'owner_id' that --filter names: check the spelling "
        "against the metadata a search without --filter shows\n"
    )
    known = run_cli(config, "search", collection, "renewal", "--filter", '{"owner": 9}')
    assert known.returncode == 0 and known.stderr == "", known.stderr
    found = run_cli(config, "search", collection, "renewal", "--filter", '{"owner": 7}')
    assert found.returncode == 0 and "n1:0" in found.stdout and found.stderr == "", found.stderr
