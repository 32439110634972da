"""The Grafana dashboard and the Prometheus alert rules, read as files: a Grafana JSON model with a Prometheus
datasource variable and the panels an operator needs; every alert with a summary that says what to do.

Through the real tools (promtool parses every rule and every panel's query) and against a real scrape of a
worker and of an app: tests/integration/deploy/test_observability.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[3]
DASHBOARD = ROOT / "deploy" / "grafana" / "vectorsync.json"
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yml"
#: Grafana's own variables in queries, and what stands for each where PromQL alone is read (promtool).
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}
#: The rows of the dashboard, in order: the issue's list, then capture lag, then freshness and drift.
ROWS = ["Queues", "Runs and failures", "Models", "Tokens (cost)", "Search", "Change capture lag", "Freshness and drift"]
CAPTURE_ROW = "Change capture lag"
#: What must have an alert: one metric each rule of that topic reads.
ALERT_TOPICS = {
    "no consumer on a queue with work": "vectorsync_queue_consumers",
    "oldest message older than a threshold": "vectorsync_queue_oldest_seconds",
    "failure rate above a threshold": "vectorsync_records_total",
    "a model failing over continuously": "vectorsync_provider_failovers_total",
    "a run stalled": "vectorsync_run_idle_seconds",
    "capture lag": "vectorsync_capture_lag_seconds",
    "freshness over its target": "vectorsync_freshness_seconds_bucket",
    "records drifted from the ledger": "vectorsync_drifted_records",
}
#: Words one of which a summary that says what to do starts an instruction with.
INSTRUCTIONS = re.compile(r"\b(start|check|add|read|run|fix|tune|take)\b", re.I)


def dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return data


def panels(model: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel that is not a row, rows' nested panels included."""
    found = []
    for panel in model["panels"]:
        if panel["type"] == "row":
            found += panel.get("panels", [])
        else:
            found.append(panel)
    return found


def dashboard_queries(model: dict[str, Any] | None = None) -> list[tuple[str, str]]:
    """(panel title, PromQL) of every target, Grafana's variables replaced by durations."""
    queries = []
    for panel in panels(model or dashboard()):
        for target in panel["targets"]:
            expr = target["expr"]
            for name, value in GRAFANA_VARIABLES.items():
                expr = expr.replace(name, value)
            queries.append((panel["title"], expr))
    return queries


def alert_rules() -> list[dict[str, Any]]:
    data = yaml.safe_load(ALERTS.read_text())
    return [rule for group in data["groups"] for rule in group["rules"]]


def metric_names(expr: str) -> set[str]:
    """The vectorsync metric (sample) names an expression reads."""
    return set(re.findall(r"\bvectorsync_[a-z0-9_]+\b", expr))


def used_metric_names() -> set[str]:
    return {name for _, expr in dashboard_queries() for name in metric_names(expr)} | {
        name for rule in alert_rules() for name in metric_names(rule["expr"])
    }


def test_the_dashboard_is_a_grafana_model_with_a_prometheus_datasource_variable() -> None:
    model = dashboard()
    assert model["uid"] == "vectorsync" and model["title"] == "vectorsync" and model["schemaVersion"] >= 36
    [variable] = [v for v in model["templating"]["list"] if v["type"] == "datasource"]
    assert (variable["name"], variable["query"]) == ("datasource", "prometheus")
    ids = [panel["id"] for panel in model["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for panel in panels(model):
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert panel["targets"] and all(t["expr"].strip() and t["refId"] for t in panel["targets"]), panel["title"]
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24 and grid["h"] > 0, panel["title"]


def test_the_dashboard_has_a_row_for_each_concern_and_one_for_capture_lag() -> None:
    model = dashboard()
    assert [p["title"] for p in model["panels"] if p["type"] == "row"] == ROWS
    by_row: dict[str, set[str]] = {}
    row = ""
    for panel in model["panels"]:
        if panel["type"] == "row":
            row = panel["title"]
            continue
        by_row.setdefault(row, set()).update(n for t in panel["targets"] for n in metric_names(t["expr"]))
    assert {"vectorsync_queue_depth", "vectorsync_queue_oldest_seconds", "vectorsync_queue_consumers"} <= by_row[
        "Queues"
    ]
    assert {"vectorsync_runs", "vectorsync_records_total", "vectorsync_failed_records"} <= by_row["Runs and failures"]
    assert {
        "vectorsync_model_calls_total",
        "vectorsync_model_errors_total",
        "vectorsync_provider_failovers_total",
        "vectorsync_model_call_seconds_bucket",
    } <= by_row["Models"]
    assert by_row["Tokens (cost)"] == {"vectorsync_model_tokens_total", "vectorsync_model_cost_total"}
    assert {"vectorsync_search_seconds_bucket", "vectorsync_search_plans_total"} <= by_row["Search"]
    assert by_row[CAPTURE_ROW] == {"vectorsync_capture_lag_seconds", "vectorsync_capture_pending"}
    tokens = [t["expr"] for p in panels(model) for t in p["targets"] if "vectorsync_model_tokens_total" in t["expr"]]
    assert any("by (model)" in e for e in tokens) and any("by (user)" in e for e in tokens)
    cost = [t["expr"] for p in panels(model) for t in p["targets"] if "vectorsync_model_cost_total" in t["expr"]]
    assert any("rate(" in e for e in cost) and any("increase(" in e and "$__range" in e for e in cost)
    assert all("by (task, model)" in e for e in cost)  # the counter's own labels: no user on cost


def test_every_alert_has_a_summary_that_says_what_to_do_and_every_topic_has_one() -> None:
    rules = alert_rules()
    names = [rule["alert"] for rule in rules]
    assert len(names) == len(set(names))
    for rule in rules:
        summary = rule["annotations"]["summary"]
        assert INSTRUCTIONS.search(summary), f"{rule['alert']}: the summary does not say what to do: {summary}"
        assert rule.get("for") and rule["labels"]["severity"] in ("warning", "critical"), rule["alert"]
    for topic, metric in ALERT_TOPICS.items():
        assert any(metric in rule["expr"] for rule in rules), f"no alert for {topic} (reading {metric})"
