"""`vectorsync collections recount`: keyword statistics counted anew from the rows, on real PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa

from store.connect.postgres import engine_url
from store.settings import load_settings
from tests.backends import unique_name
from tests.crm import store_records
from tests.settings_files import pushed_collection
from tests.workers import run_cli


def test_recount_repairs_drifted_statistics_and_says_how_many_terms_were_off(tmp_path: Path, postgres_url: str) -> None:
    name = unique_name("docs")
    config = pushed_collection(tmp_path, postgres_url, name, dimensions=8, keywords=True)
    store_records(config, name, [("1", "refunds take five days", {}), ("2", "refunds of annual plans", {})])
    table = load_settings(config).vectors.table_prefix + name
    engine = sa.create_engine(engine_url(postgres_url))
    with engine.begin() as conn:
        conn.execute(sa.text(f"UPDATE \"{table}_kwstats\" SET docs = docs + 3 WHERE term = 'refund'"))
    engine.dispose()
    first = run_cli(config, "collections", "recount", name)
    assert first.returncode == 0, first.stdout + first.stderr
    assert f"recounted the keyword statistics of {name}: 1 term was off, now exact" in first.stdout
    again = run_cli(config, "collections", "recount", name)
    assert "they were exact" in again.stdout, again.stdout
    missing = run_cli(config, "collections", "recount", "nosuch")
    assert missing.returncode == 2 and "nosuch" in missing.stderr, missing.stderr


def test_keywords_turned_on_by_collections_set_make_keyword_search_work_as_the_refusal_says(
    tmp_path: Path, postgres_url: str
) -> None:
    name = unique_name("docs")
    config = pushed_collection(tmp_path, postgres_url, name, dimensions=8)  # vector mode: no keyword index
    store_records(config, name, [("1", "refunds take five days", {}), ("2", "annual plans renew in May", {})])
    refused = run_cli(config, "search", name, "refunds", "--mode", "keyword")
    assert refused.returncode != 0
    assert (
        f"collection '{name}' keeps no keyword index, so it cannot run a keyword search: turn it on with "
        f"`vectorsync collections set {name} --keywords`"
    ) in " ".join(refused.stderr.split()), refused.stderr
    edited = config.read_text() + f"[collections.{name}.search]\nkeywords = true\n"
    config.write_text(edited)  # settings alone do not change a collection's rules: they disagree, and say so
    disagreed = run_cli(config, "search", name, "refunds", "--mode", "keyword")
    assert disagreed.returncode != 0
    assert "keywords is false there, true in these settings" in " ".join(disagreed.stderr.split())
    turned = run_cli(config, "collections", "set", name, "--keywords")
    assert turned.returncode == 0, turned.stdout + turned.stderr
    assert "keywords: off -> " in turned.stdout and "the stored text of 2 chunks analyzed" in turned.stdout
    recounted = run_cli(config, "collections", "recount", name)
    assert recounted.returncode == 0, recounted.stdout + recounted.stderr
    assert "they were exact" in recounted.stdout  # analyzed as the rule changed
    found = run_cli(config, "search", name, "refunds", "--mode", "keyword")
    assert found.returncode == 0, found.stderr
    assert "1:0" in found.stdout and "2:0" not in found.stdout
