"""`vectorsync verify` through its entry point, on a real pgvector collection over a SQL source: a celery worker
indexes the records, each kind of drift is made behind the ledger's back with SQL on the collection's table, and
verify finds each; `--repair` sends what fixes them to the running worker, after which verify is clean and every
record it did not repair is exactly as it was."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis
from celery import Celery

from store.broker.config import celery_config
from store.client import Client
from store.settings import load_settings
from tests.backends import unique_name
from tests.crm import CrmTable, note
from tests.fake_openai import FakeOpenAI
from tests.settings_files import settings_toml
from tests.workers import celery_worker, run_cli, wait_for

pytestmark = pytest.mark.slow

RECORDS = 12


@dataclass
class Rig:
    config: Path
    collection: str
    client: Client
    database: str

    @property
    def table(self) -> str:
        return f"vs_{self.collection}"

    def verify(self, *options: str) -> tuple[int, dict[str, Any]]:
        result = run_cli(self.config, "verify", self.collection, "--json", *options)
        assert result.returncode in (0, 1), result.stderr
        return result.returncode, dict(json.loads(result.stdout))

    def sql(self, statement: str) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.database, autocommit=True) as conn:
            cursor = conn.execute(statement)  # test-owned names
            return cursor.fetchall() if cursor.description else []

    def rows(self) -> dict[str, tuple[Any, ...]]:
        found = self.sql(
            f"SELECT id, record_id, chunk, text, embedding::text, metadata::text, model, keywords::text, updated_at "
            f"FROM {self.table}"
        )
        return {row[0]: row for row in found}


@pytest.fixture
def rig(tmp_path: Path, broker_redis_url: str, scratch_redis_url: str, postgres_url: str) -> Iterator[Rig]:
    redis.Redis.from_url(broker_redis_url).flushdb()
    collection = unique_name("verify")
    with FakeOpenAI(dimensions=8) as openai:
        crm = CrmTable(postgres_url, f"crm_{collection}")
        config = tmp_path / "vectorsync.toml"
        config.write_text(
            settings_toml(
                broker=broker_redis_url,
                cache=scratch_redis_url,
                database=postgres_url,
                openai_url=openai.url,
                table=crm.name,
                collection=collection,
                max_tokens=32,
                overlap=4,
                extra=f"[collections.{collection}.search]\nkeywords = true\n",  # verify recounts its statistics
            )
        )
        settings = load_settings(config)
        app = Celery(set_as_current=False)
        app.conf.update(celery_config(settings))
        app.control.purge()
        app.close()
        crm.insert([note(i) for i in range(1, RECORDS + 1)])
        with Client(settings) as client:
            yield Rig(config, collection, client, postgres_url)
        crm.close()


def test_verify_finds_each_drift_and_repair_fixes_them_all_with_nothing_else_changed(rig: Rig) -> None:
    ids = [str(i) for i in range(1, RECORDS + 1)]
    with celery_worker(rig.config):
        assert run_cli(rig.config, "index", rig.collection, *ids).returncode == 0
        wait_for(lambda: len(rig.client.ledger.entries(rig.collection, ids)) == RECORDS, timeout=90, what="indexed")
        code, clean = rig.verify()
        assert (code, clean["clean"], clean["records"], clean["notes"]) == (0, True, RECORDS, [])
        assert clean["chunks"] == len(rig.rows()) > RECORDS
        before, ledger = rig.rows(), rig.client.ledger.entries(rig.collection, ids)
        several = sorted((i for i in ids[3:] if ledger[i].chunks >= 2), key=int)
        shorter, text = several[0], several[1]

        rig.sql(f"DELETE FROM {rig.table} WHERE record_id = '1'")  # a record's chunks deleted
        rig.sql(f"UPDATE {rig.table} SET text = 'tampered words' WHERE id = '{text}:1'")  # text not its hash
        rig.sql(  # an orphan chunk: a record neither the ledger nor the source has
            f"INSERT INTO {rig.table} (id, record_id, chunk, embedding, text, metadata, model, keywords, "
            "keyword_length, text_hash) SELECT '999:0', '999', 0, embedding, text, "
            "jsonb_set(metadata, '{record_id}', '\"999\"'), model, keywords, keyword_length, text_hash "
            f"FROM {rig.table} WHERE id = '2:0'"
        )
        rig.sql(f"DELETE FROM {rig.table} WHERE id = '{shorter}:{ledger[shorter].chunks - 1}'")  # one chunk fewer
        rig.sql(  # keyword statistics off by one document
            f"UPDATE {rig.table}_kwstats SET docs = docs + 1 WHERE ctid = "
            f"(SELECT ctid FROM {rig.table}_kwstats WHERE term <> '' ORDER BY term, shard LIMIT 1)"
        )

        code, drifted = rig.verify()
        assert (code, drifted["clean"]) == (1, False)
        kinds = {d["record_id"]: d["kinds"] for d in drifted["first"]}
        assert kinds == {"999": ["orphan"], "1": ["missing"], text: ["text"], shorter: ["count"]}
        assert (drifted["drifted"], drifted["orphan_records"], drifted["orphan_chunks"]) == (3, 1, 1)
        assert drifted["keyword_terms"] > 0
        text_only = rig.verify()[1]
        assert text_only == drifted | {"seconds": text_only["seconds"]}  # reading changes nothing

        code, repaired = rig.verify("--repair")
        assert code == 1
        assert repaired["repair"] == {
            "reindexed": 3,
            "orphans_sent": 1,
            "batches": 2,
            "recounted": repaired["repair"]["recounted"],
            "left": [],
        }
        assert repaired["repair"]["recounted"] > 0
        wait_for(lambda: rig.verify()[0] == 0, timeout=90, what="verify to report clean after the repair")

    after, again = rig.rows(), rig.client.ledger.entries(rig.collection, ids)
    assert "999:0" not in after
    fixed = {"1", text, shorter}
    assert {i: r for i, r in after.items() if r[1] not in fixed} == {
        i: r for i, r in before.items() if r[1] not in fixed
    }  # every other row as it was, its write time included
    assert {i: r[:-1] for i, r in after.items()} == {i: r[:-1] for i, r in before.items()}  # fixed as they were
    assert again == ledger
    assert all(again[i].indexed_at == ledger[i].indexed_at for i in ids if i not in fixed)


def test_bad_input_exits_2_naming_the_fix(rig: Rig) -> None:
    missing = run_cli(rig.config, "verify", "nosuch")
    assert missing.returncode == 2 and "collection 'nosuch' is not configured" in missing.stderr
    sample = run_cli(rig.config, "verify", rig.collection, "--sample", "0")
    assert sample.returncode == 2 and "--sample must be a positive number of records, got 0" in sample.stderr
