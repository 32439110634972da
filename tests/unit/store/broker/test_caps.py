"""store/broker/caps.py: caps a run cannot keep, refused before anything is created or sent (issue 48): a cost cap on
a chain with a model that declares no price (defect 7: its calls cost nothing against it, so a run capped at
0.000001 spent 6,446 tokens), and a resumed run's cap at or below what the run has spent already (defect 9b:
``--max-tokens 1`` on a run that spent 1,968 was taken, and its status said "-1967 left")."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

import producer.cli.runs as runs_cli
from producer.cli import app
from store import ConfigError
from store.broker.producer import Producer
from store.calls.spend import Spend
from store.settings import Settings
from store.state.generations.base import implicit, registered
from store.state.ledger import MemoryLedger, Parked, RunStatus

SOURCE = {"kind": "python", "loader": "tests.unit.worker.pipeline.test_hostile_input:load_records"}


def settings(*prices: float | None) -> Settings:
    """A collection embedded by a chain of one model per price (None: no price declared)."""
    models = {
        f"m{n}": {"provider": "fake", "model": "m", "dimensions": 8}
        | ({} if price is None else {"price_per_million_tokens": price})
        for n, price in enumerate(prices)
    }
    return Settings.model_validate(
        {
            "vectors": {"store": "memory", "dimensions": 8},
            "models": models,
            "embeddings": {"chain": list(models)},
            "collections": {"notes": {"source": SOURCE}},
        }
    )


class Rig:
    """A producer over a memory ledger, its sends kept."""

    def __init__(self, config: Settings) -> None:
        self.ledger, self.sent = MemoryLedger(), list[tuple[str, dict[str, Any]]]()
        self.producer = Producer(
            config, send=lambda name, **options: self.sent.append((name, options)), ledger=self.ledger
        )
        self.producer.coalescer.client = None  # no Redis: nothing to coalesce with

    def paused(self, *, tokens: int, cost: float | None, max_tokens: int | None = None) -> str:
        """A run paused at its cap after spending ``tokens`` (and ``cost``), one batch parked."""
        run = self.ledger.create_run("notes")
        self.ledger.set_caps(run, max_tokens=max_tokens or tokens, max_cost=None)
        self.ledger.add_spend(
            [
                Spend(
                    run_id=run,
                    collection="notes",
                    model="m",
                    generation=1,
                    tokens=tokens,
                    calls=3,
                    cost=cost,
                    counted_by="provider",
                )
            ]
        )
        self.ledger.pause_run(Parked(run_id=run, batch=0, collection="notes", ids=["1"]), "paused at its budget")
        return run


def test_a_cost_cap_on_a_model_with_no_price_is_refused_before_the_run_is_created() -> None:
    rig = Rig(settings(None))
    with pytest.raises(ConfigError) as refused:
        rig.producer.reindex_all("notes", max_cost=0.000001)
    message = str(refused.value)
    assert "--max-cost 1e-06" in message and "'m0'" in message
    assert "[models.m0] price_per_million_tokens" in message and "--max-tokens" in message
    assert (rig.ledger.recent_runs(), rig.sent) == ([], [])


def test_a_fallback_without_a_price_is_refused_too_and_a_priced_chain_is_capped() -> None:
    rig = Rig(settings(0.02, None))
    with pytest.raises(ConfigError, match=r"model 'm1' declares no price"):
        rig.producer.reindex_all("notes", max_cost=5.0)
    assert rig.producer.reindex_all("notes", max_tokens=100) and len(rig.sent) == 1  # a token cap needs no price
    priced = Rig(settings(0.02, 0.02))
    run = priced.producer.reindex_all("notes", max_cost=5.0)
    assert priced.ledger.run(run).max_cost == 5.0 and len(priced.sent) == 1


def test_a_resume_with_a_cost_cap_on_a_model_with_no_price_is_refused() -> None:
    rig = Rig(settings(None))
    run = rig.paused(tokens=1968, cost=None)
    with pytest.raises(ConfigError, match=r"model 'm0' declares no price"):
        rig.producer.resume(run, max_cost=1.0)
    assert rig.ledger.run(run).status == RunStatus.PAUSED and rig.sent == []


def test_a_resume_cap_at_or_below_the_spend_is_refused_naming_both() -> None:
    rig = Rig(settings(0.02))
    run = rig.paused(tokens=1968, cost=0.5)
    for cap in (1, 1968):
        with pytest.raises(ConfigError, match=rf"--max-tokens {cap:,} is not above the 1,968 tokens run {run} has"):
            rig.producer.resume(run, max_tokens=cap)
    with pytest.raises(ConfigError, match=r"--max-cost 0.25 is not above the 0.5 run .* a cap above 0.5"):
        rig.producer.resume(run, max_cost=0.25)
    assert rig.ledger.run(run).status == RunStatus.PAUSED and rig.sent == []
    assert rig.producer.resume(run, max_tokens=5000, max_cost=1.0) == 1
    assert rig.ledger.run(run).max_tokens == 5000


def test_runs_resume_says_the_refusal_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    rig = Rig(settings(0.02))
    run = rig.paused(tokens=1968, cost=0.5)
    monkeypatch.setattr(runs_cli, "open_producer", lambda: rig.producer)
    done = CliRunner().invoke(app, ["runs", "resume", run, "--max-tokens", "1"])
    assert done.exit_code != 0 and rig.sent == [] and "Traceback" not in done.output
    said = " ".join(done.output.split())
    assert f"--max-tokens 1 is not above the 1,968 tokens run {run} has spent already" in said
    assert "a cap above 1,968" in said


def test_a_migration_building_on_a_model_with_no_price_refuses_a_cost_cap_of_its_collection() -> None:
    """A run of a name writes the generation a migration builds too: its chain's prices count, not the settings'
    alone; and a run of that generation (the migration's) counts its chain's."""
    config = settings(0.02, None)
    rig = Rig(config.model_copy(update={"embeddings": config.embeddings.model_copy(update={"chain": ["m0"]})}))
    assert rig.producer.reindex_all("notes", max_cost=5.0)  # the live chain is priced
    building = registered(config, "notes", ["m1"], 2)  # as `vectorsync migrate notes --chain m1` registers it
    rig.ledger.generations.begin(implicit(rig.producer.settings, "notes"), building)
    with pytest.raises(ConfigError, match=r"cannot cap a run of 'notes': model 'm1' declares no price"):
        rig.producer.reindex_all("notes", max_cost=5.0)
    run = rig.ledger.create_run(building.physical, kind="migrate")
    rig.ledger.pause_run(Parked(run_id=run, batch=0, collection=building.physical, ids=["1"]), "paused")
    with pytest.raises(ConfigError, match=r"cannot cap a run of 'notes__g2': model 'm1' declares no price"):
        rig.producer.resume(run, max_cost=5.0)
