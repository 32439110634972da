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
