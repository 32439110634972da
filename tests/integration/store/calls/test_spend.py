"""Spend through the real openai client against the fake server: the tokens its usage counted, exactly, and
their cost at the declared price, summed in the ledger (memory and PostgreSQL)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from store.calls import spend
from store.embeddings import Embeddings
from store.state.ledger import Ledger, MemoryLedger
from store.state.ledger.postgres import PostgresLedger
from tests.backends import unique_name
from tests.fake_openai import FakeOpenAI, cl100k_tokens, settings_for

TEXTS = [f"note {i}: the customer asked about invoices, réunion à 10h 👍, `def f(x): return x`" for i in range(7)]


@pytest.fixture(params=["memory", "postgres"])
def ledger(request: pytest.FixtureRequest) -> Iterator[Ledger]:
    made: Ledger = (
        MemoryLedger() if request.param == "memory" else PostgresLedger(request.getfixturevalue("postgres_url"))
    )
    yield made
    made.close()


def embed_in_a_run(server: FakeOpenAI, ledger: Ledger, price: float | None) -> str:
    settings = settings_for(server, model={"price_per_million_tokens": price}, batch_size=3, parallelism=3)
    embeddings = Embeddings.from_settings(settings)
    run = unique_name("run")
    with spend.tallied(run) as tally, spend.charged_to("notes", 2):
        embeddings.embed_many(TEXTS)
    ledger.add_spend(tally.rows())
    return run


def test_a_runs_spend_is_the_tokens_the_server_counted_at_the_declared_price(ledger: Ledger) -> None:
    with FakeOpenAI(dimensions=8) as server:
        run = embed_in_a_run(server, ledger, 0.02)
    expected = sum(cl100k_tokens(text) for text in TEXTS)
    assert server.served_tokens == expected and server.served_calls == 3  # 7 texts in calls of 3
    [row] = ledger.run_spend(run)
    assert (row.collection, row.model, row.generation, row.counted_by) == (
        "notes",
        "text-embedding-test",
        2,
        "provider",
    )
    assert (row.tokens, row.calls) == (expected, 3)
    assert row.cost == pytest.approx(expected * 0.02 / 1e6)


def test_no_price_declared_means_no_cost(ledger: Ledger) -> None:
    with FakeOpenAI(dimensions=8) as server:
        run = embed_in_a_run(server, ledger, None)
    [row] = ledger.run_spend(run)
    assert row.tokens == server.served_tokens
    assert row.cost is None
