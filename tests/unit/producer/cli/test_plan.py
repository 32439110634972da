"""What ``--plan`` prints: the records judged, what is bought and reused, tokens and how they were counted, the
cost only where a price is declared, and the JSON form in full. (Plans against runs: tests/unit/worker.)"""

from __future__ import annotations

import json

import pytest

from producer.cli.plan import render, to_json
from store.plan import Plan


def plan(**changes: object) -> Plan:
    made = Plan(collection="notes", generation="notes", kind="reindex", entry="small", model="text-embedding-3-small")
    made.new, made.changed, made.unchanged, made.gone = 10, 2, 88, 1
    made.chunks, made.reused, made.cached, made.embed, made.tokens, made.calls = 30, 4, 1, 25, 1234, 1
    for name, value in changes.items():
        setattr(made, name, value)
    return made


def test_render_shows_records_texts_tokens_calls_and_says_when_no_price_is_declared(
    capsys: pytest.CaptureFixture[str],
) -> None:
    render(plan())
    printed = capsys.readouterr().out
    assert "reindex of notes (writes notes): nothing sent, nothing written" in printed
    assert "10 new, 2 changed, 88 unchanged" in printed
    assert "estimated (4 characters a token)" in printed
    assert "no price declared (models.small.price_per_million_tokens)" in printed
    assert "no rate limit declared" in printed


def test_render_prices_and_times_what_is_declared(capsys: pytest.CaptureFixture[str]) -> None:
    render(plan(counted_by="tokenizer", price_per_million_tokens=0.02, cost=0.00002468, rate_limited_seconds=61.2))
    printed = capsys.readouterr().out
    assert "$0.000025 at $0.02 per million tokens" in printed
    assert "by the model's tokenizer" in printed
    assert "at least 61 s under the declared rate limits" in printed


def test_json_holds_the_plan_in_full() -> None:
    data = json.loads(to_json(plan()))
    assert (data["records"], data["embed"], data["tokens"], data["calls"], data["cost"]) == (100, 25, 1234, 1, None)


def test_render_shows_the_batch_lane_s_cost_and_wait_beside_the_chain_s(capsys: pytest.CaptureFixture[str]) -> None:
    render(plan(price_per_million_tokens=0.02, cost=4.12, batch_price_per_million_tokens=0.01, batch_cost=2.06))
    assert "--batch" not in capsys.readouterr().out  # no lane, no line
    laned = plan(
        price_per_million_tokens=0.02,
        cost=4.12,
        batch_price_per_million_tokens=0.01,
        batch_cost=2.06,
        batch_wait_hours=24,
    )
    render(laned)
    printed = capsys.readouterr().out
    assert "$4.12 at $0.02 per million tokens" in printed
    assert "--batch   $2.06 at $0.01 per million tokens; the answers within 24 h" in printed
    render(plan(batch_wait_hours=12))
    assert "no batch price declared (models.small.batch.price_per_million_tokens); the answers within 12 h" in (
        capsys.readouterr().out
    )
