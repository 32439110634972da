"""What the provider is asked for, end to end: edits embedded in full calls, the spend the workers write equal to
what the server counted, a text the provider refuses failing alone until fixed, and an outage retried."""

from __future__ import annotations

import math
import random

import pytest
import sqlalchemy as sa

from tests.crm import note
from tests.integration.worker.end_to_end.world import World, reindex_and_wait
from tests.workers import celery_worker, run_cli, wait_for

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("broker", ["redis"], indirect=True)  # the fan-out does not depend on the broker
def test_a_one_percent_edit_is_embedded_in_full_provider_calls(world: World) -> None:
    world.crm.insert([note(i) for i in range(1, 401)])
    with celery_worker(world.config):
        assert reindex_and_wait(world).returncode == 0
        _assert_spend_is_what_the_server_counted(world)
        before = set(text for text, _ in world.expected().values())
        edited = random.Random(9).sample(range(1, 401), 4)  # 1%, on different pages of worker.batch_size ids
        for i in edited:
            world.crm.update(i, body=note(i, version=1)["body"])
        new_chunks = {text for text, _ in world.expected().values()} - before
        calls = world.openai.calls
        again = reindex_and_wait(world)
        assert "done: 400 records, 4 indexed, 396 unchanged, 0 failed" in again.stdout, again.stdout
        assert world.in_sync()
    batch = world.settings.embeddings.batch_size
    assert 0 < world.openai.calls - calls <= math.ceil(len(new_chunks) / batch)  # not one call per edited record


@pytest.mark.parametrize("broker", ["redis"], indirect=True)
def test_a_first_load_and_an_edit_that_leaves_updated_at_make_the_fewest_provider_calls(world: World) -> None:
    """Every call full but the run's last: the batches leave a partly filled call to the run's pool. The edit is
    the issue's case: every 50th record by a plain UPDATE that leaves updated_at alone, so each id page's probe
    record no longer hashes as recorded and the page goes whole, one changed record in each batch."""
    records, batch = 2000, world.settings.embeddings.batch_size
    world.crm.insert([note(i) for i in range(1, records + 1)])
    loaded = {text for text, _ in world.expected().values()}
    with celery_worker(world.config):
        first = reindex_and_wait(world)
        assert f"done: {records} records, {records} indexed, 0 unchanged, 0 failed" in first.stdout, first.stdout
        assert world.openai.calls == math.ceil(len(loaded) / batch)
        edited = list(range(1, records + 1, 50))
        with world.crm.engine.begin() as conn:
            for i in edited:
                conn.execute(
                    sa.text(f'UPDATE "{world.crm.name}" SET body = :b WHERE id = :i'),  # test-owned name
                    {"b": note(i, version=1)["body"], "i": i},
                )
        fresh = {text for text, _ in world.expected().values()} - loaded
        calls = world.openai.calls
        again = reindex_and_wait(world)
        assert (
            f"done: {records} records, {len(edited)} indexed, {records - len(edited)} unchanged, 0 failed"
            in again.stdout
        ), again.stdout
        assert world.in_sync()
    assert world.openai.calls - calls == math.ceil(len(fresh) / batch)  # not one call per edited record


@pytest.mark.parametrize("broker", ["redis"], indirect=True)  # the pipeline's failures rows
def test_a_record_the_provider_rejects_lands_in_failures_and_retries_once_fixed(world: World) -> None:
    rows = [note(i) for i in range(1, 41)]
    rows[16]["body"] = "this text carries POISON the provider refuses"
    world.crm.insert(rows)
    world.openai.reject_containing = "POISON"
    with celery_worker(world.config):
        result = reindex_and_wait(world)
        assert result.returncode == 1
        assert "done: 40 records, 39 indexed, 0 unchanged, 1 failed" in result.stdout
        [failure] = world.ledger().failures(world.collection)
        assert failure.record_id == "17" and "POISON" in failure.error and "InputError" in failure.error
        listed = run_cli(world.config, "failures")
        assert "17" in listed.stdout and "InputError" in listed.stdout
        expected = world.expected()
        assert world.stored() == {k: v for k, v in expected.items() if not k.startswith("17:")}

        world.crm.update(17, body="now a perfectly ordinary note about the rollout")
        replay = run_cli(world.config, "failures", "--collection", world.collection, "--retry")
        assert "enqueued 1 failed records again" in replay.stdout, replay.stdout + replay.stderr
        wait_for(world.in_sync, timeout=60, what="the fixed record to be indexed")
        wait_for(lambda: not world.ledger().failures(world.collection), timeout=30, what="the failure to clear")


def test_a_live_record_whose_provider_fails_for_a_while_is_retried_and_indexed(world: World) -> None:
    world.crm.insert([note(1)])
    for _ in range(2):  # both tries of the first attempt (embeddings.max_attempts = 2) fail
        world.openai.push(status=500)
    producer = world.producer()
    with celery_worker(world.config, concurrency=1):
        producer.index_record(world.collection, 1)
        wait_for(world.in_sync, timeout=60, what="the record, after its task retried")
    assert world.openai.calls >= 3
    assert world.ledger().failures(world.collection) == []
    producer.close()


def _assert_spend_is_what_the_server_counted(world: World) -> None:
    """The first run's spend, written by the workers batch by batch, is the fake server's usage, exactly."""
    ledger = world.ledger()
    try:
        [run] = ledger.recent_runs(1)
        [row] = ledger.run_spend(run.run_id)
    finally:
        ledger.close()
    assert (row.collection, row.model, row.generation, row.counted_by) == (
        world.collection,
        "text-embedding-test",
        1,
        "provider",
    )
    assert (row.tokens, row.calls) == (world.openai.served_tokens, world.openai.served_calls)
    assert row.cost is None  # no price declared
