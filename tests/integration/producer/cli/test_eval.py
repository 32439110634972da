"""`vectorsync eval` as a script runs it: a table per mode, or JSON; a bad queries file refused before any search."""

from __future__ import annotations

import json
from pathlib import Path

from tests.backends import unique_name
from tests.crm import store_records
from tests.settings_files import pushed_collection
from tests.workers import run_cli

#: Records with words of their own, so the fake embeddings (hashed words) and BM25 both find them.
RECORDS = {
    "refunds": "Refunds are paid back to the card within fourteen days of the return.",
    "shipping": "Parcels ship from the Lisbon warehouse every weekday morning.",
    "invoices": "Invoices are emailed as PDF files on the first day of each month.",
    "passwords": "Reset a forgotten password from the login page with the emailed link.",
}
QUERIES = [
    {"query": "when are refunds paid back", "relevant": ["refunds"]},
    {"query": "Lisbon warehouse parcels", "relevant": ["shipping"]},
    {"query": "monthly PDF invoices", "relevant": ["invoices"], "filter": {"topic": "billing"}},
]


def indexed(tmp_path: Path, postgres_url: str) -> tuple[Path, str]:
    collection = unique_name("eval")
    config = pushed_collection(tmp_path, postgres_url, collection, dimensions=64, keywords=True)
    store_records(
        config,
        collection,
        [
            (rid, text, {"topic": "billing" if rid in ("refunds", "invoices") else "other"})
            for rid, text in RECORDS.items()
        ],
    )
    return config, collection


def test_vectorsync_eval_prints_a_table_per_mode_and_json(tmp_path: Path, postgres_url: str) -> None:
    config, collection = indexed(tmp_path, postgres_url)
    queries = tmp_path / "queries.jsonl"
    queries.write_text("".join(json.dumps(q) + "\n" for q in QUERIES))

    shown = run_cli(config, "eval", collection, "--queries", str(queries), "--k", "3")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert any("recall@3" in line and "MRR@3" in line and "nDCG@3" in line for line in lines)
    for mode in ("vector", "keyword", "hybrid"):
        assert any(line.split()[:1] == [mode] for line in lines), mode

    as_json = json.loads(
        run_cli(config, "eval", collection, "-q", str(queries), "--modes", "keyword,vector", "--json").stdout
    )
    assert as_json["collection"] == collection and as_json["k"] == 10
    assert [m["mode"] for m in as_json["modes"]] == ["keyword", "vector"]
    keyword = as_json["modes"][0]
    assert keyword["queries"] == 3 and keyword["mrr"] == 1.0 and keyword["recall"] == 1.0
    assert len(as_json["scores"]) == 6 and as_json["scores"][0]["ranked"][0] == "refunds"
    # The filtered query (scores 4 and 5: keyword, then vector): billing records only; BM25 returns only the
    # records holding a query term, the vector search every record the filter lets through.
    assert as_json["scores"][4]["mode"] == "keyword" and as_json["scores"][4]["ranked"] == ["invoices"]
    assert as_json["scores"][5]["ranked"] == ["invoices", "refunds"]


def test_a_bad_queries_file_is_refused_before_any_search(tmp_path: Path, postgres_url: str) -> None:
    config, _ = indexed(tmp_path, postgres_url)
    queries = tmp_path / "queries.jsonl"
    queries.write_text(json.dumps(QUERIES[0]) + '\n{"query": "x", "relevant": []}\nnot json\n')
    # The collection named does not exist: the file's errors come first, so nothing was searched.
    refused = run_cli(config, "eval", "no_such_collection", "--queries", str(queries))
    assert refused.returncode == 2
    assert refused.stderr.startswith(f"error: queries file '{queries}' has 2 bad line(s), nothing was run")
    assert "line 2: 'relevant' is empty" in refused.stderr
    assert "line 3: not JSON (Expecting value at column 1)" in refused.stderr

    modes = tmp_path / "good.jsonl"
    modes.write_text(json.dumps(QUERIES[0]) + "\n")
    wrong = run_cli(config, "eval", "no_such_collection", "--queries", str(modes), "--modes", "vector,fuzzy")
    assert wrong.returncode == 2
    assert wrong.stderr.strip() == "error: search mode 'fuzzy' is not known: use vector, keyword, hybrid"
