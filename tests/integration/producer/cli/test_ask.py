"""`vectorsync ask` as a script runs it: the answer with its sources, and an exit code by outcome."""

from __future__ import annotations

from typing import Any

from tests.unit.store.retrieval.test_service import NOTES


def test_vectorsync_ask_prints_the_answer_with_its_sources_and_exits_by_outcome(
    tmp_path: Any, postgres_url: str
) -> None:
    import json

    from tests.backends import unique_name
    from tests.crm import store_records
    from tests.settings_files import pushed_collection
    from tests.workers import run_cli

    collection = unique_name("ask")
    config = pushed_collection(tmp_path, postgres_url, collection, dimensions=64)

    store_records(config, collection, [(rid, text, {"tenant": tenant}) for rid, tenant, text in NOTES])

    answered = run_cli(config, "ask", collection, "how are acme refunds paid?", "--filter", '{"tenant": "acme"}')
    assert answered.returncode == 0, answered.stderr
    first, *sources = answered.stdout.strip().splitlines()
    assert first.startswith("Refunds at Acme are paid within 14 days")
    assert sources and sources[0].startswith("[1] acme-1 (")

    missing = run_cli(config, "ask", collection, "refunds?", "--filter", '{"tenant": "initech"}')
    assert missing.returncode == 2
    assert missing.stdout.strip() == f"not answered: no passage in '{collection}' matches the question and the filter"

    as_json = json.loads(run_cli(config, "ask", collection, "how are acme refunds paid?", "--json").stdout)
    assert as_json["answered"] is True and as_json["sources"][0]["number"] == 1 and as_json["model"] == "fake"

    empty = run_cli(config, "ask", collection, " ")
    assert empty.returncode == 2 and empty.stderr.startswith("error: the question is empty")
