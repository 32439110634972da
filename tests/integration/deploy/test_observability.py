"""The dashboard and the alert rules through the real tools and against real scrapes.

- ``promtool check rules`` passes deploy/prometheus/alerts.yml, and every query of deploy/grafana/vectorsync.json
  (each made a recording rule of a rules file of its own; Grafana's ``$__rate_interval`` and the like
  replaced by durations) parses with promtool.
- Every metric name the rules and the dashboard read appears in a real scrape: of a ``celery worker``'s
  ``worker.metrics_port`` after a reindex whose first model fails over, with a record that fails, scraped while
  the run is open; and of an app process that searches a pgvector collection with a filter under a user, through a
  rate-limited model, and serves prometheus_client's default registry, as an app exports its metrics. The names
  change capture adds are served for the captured collection of the scrape.
- A fresh worker's first scrape, before any task, fault or failure, already holds every one of those names, with
  a series for each label value its settings tell (models, collections, queues) at 0: ``rate()`` and
  ``increase()`` need a sample before the first event.

promtool comes from Debian's ``prometheus`` package (tests/integration/deploy/promtool.py); without it these
tests skip, saying why. The files themselves, read without tools: tests/unit/deploy/test_observability_files.py.
"""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import redis
import yaml
from prometheus_client.parser import text_string_to_metric_families

from store.broker.producer import Producer
from store.capture.control import enable
from store.contract import QUEUES
from store.settings import load_settings
from store.state.ledger import RunStatus
from tests.backends import unique_name
from tests.crm import CrmTable, note
from tests.fake_openai import FakeOpenAI
from tests.integration.deploy.promtool import promtool_path
from tests.services import free_port
from tests.settings_files import settings_toml
from tests.unit.deploy.test_observability_files import ALERTS, alert_rules, dashboard_queries, used_metric_names
from tests.workers import ROOT, celery_worker, process_env, wait_for
from worker.metrics.series import OUTCOMES

RECORDS = 60
BATCH = 5  # 12 index_batch tasks of half a second each: the run is open for several scrapes
MAX_CHUNKS = 20  # [limits] max_chunks_per_record: the long record goes to the failures table
SEARCHES = 23  # through a model of 120 requests a minute (a burst of 20): the last ones wait for the limit


@pytest.fixture(scope="module")
def promtool() -> str:
    return promtool_path()


def check_rules(promtool: str, path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=60)


def test_promtool_check_rules_passes_the_alert_rules(promtool: str) -> None:
    result = check_rules(promtool, ALERTS)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(alert_rules())} rules found" in result.stdout


def _as_rules(queries: list[tuple[str, str]]) -> str:
    rules = [{"record": f"vectorsync_dashboard:query_{n}", "expr": expr} for n, (_, expr) in enumerate(queries)]
    return yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}, sort_keys=False)


def test_every_dashboard_query_parses_with_promtool(promtool: str, tmp_path: Path) -> None:
    queries = dashboard_queries()
    assert len(queries) >= 30
    rules = tmp_path / "dashboard.yml"
    rules.write_text(_as_rules(queries))
    result = check_rules(promtool, rules)
    assert result.returncode == 0, result.stdout + result.stderr
    broken = tmp_path / "broken.yml"  # the check finds a query that does not parse
    broken.write_text(_as_rules([("broken", "sum by (queue) (rate(vectorsync_queue_depth[5m])")]))
    assert check_rules(promtool, broken).returncode != 0


# --- the scrapes ------------------------------------------------------------------------------------------------


def sample_names(url: str) -> set[str]:
    with urllib.request.urlopen(url, timeout=30) as response:
        text = response.read().decode()
    return {sample.name for family in text_string_to_metric_families(text) for sample in family.samples}


def _config(
    folder: Path,
    *,
    broker: str,
    cache: str,
    database: str,
    primary: FakeOpenAI,
    backup: FakeOpenAI,
    table: str,
    collection: str,
    metrics_port: int,
) -> Path:
    """Two entries of one model at two endpoints; a cap on chunks that one long record goes over."""
    text = settings_toml(
        broker=broker,
        cache=cache,
        database=database,
        openai_url=primary.url,
        table=table,
        collection=collection,
        batch_size=BATCH,
        metrics_port=metrics_port,
        capture=True,
        extra=f'[models.backup]\nprovider = "openai"\nmodel = "text-embedding-test"\n'
        f'dimensions = 8\nbase_url = "{backup.url}"\ntimeout = 5\nprice_per_million_tokens = 0.02\n\n'
        f"[limits]\nmax_chunks_per_record = {MAX_CHUNKS}\n",
    )
    text = text.replace('chain = ["fake_openai"]', 'chain = ["fake_openai", "backup"]')
    config = folder / "vectorsync.toml"
    config.write_text(text)
    return config


def _worker_scrapes(config: Path, collection: str, url: str, primary: FakeOpenAI) -> set[str]:
    """Reindex with a worker whose first model fails (500, retried, then 401: failover), scraping it while the run
    is open and once it is done; every sample name seen."""
    settings = load_settings(config)
    primary.push(status=500)
    primary.push(status=401)
    seen: set[str] = set()
    enable(settings, collection)
    with celery_worker(config, concurrency=1):
        producer = Producer(settings)
        try:
            run_id = producer.reindex_all(collection)

            def open_run_scraped() -> bool:
                seen.update(sample_names(url))
                return {"vectorsync_run_idle_seconds", "vectorsync_run_progress"} <= seen

            wait_for(open_run_scraped, timeout=90, every=0.1, what="a scrape while the run is open")
            wait_for(lambda: producer.reindex_status(run_id).status.ended, timeout=120, what=f"run {run_id}")
            assert producer.reindex_status(run_id).status == RunStatus.DONE
            seen.update(sample_names(url))
        finally:
            producer.close()
    return seen


APP = textwrap.dedent("""
    import sys
    from prometheus_client import start_http_server
    from store import Filter
    from store.calls.accounting import attributed_to
    from store.query import search

    collection, port, searches = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    with attributed_to("alice"):
        for i in range(searches):
            search(collection, f"rollout pricing {i}", filter=Filter.eq("kind", "call"), limit=3)
    start_http_server(port, addr="127.0.0.1")
    print("serving", flush=True)
    sys.stdin.read()
""")


def _app_scrape(config: Path, collection: str) -> set[str]:
    """An app that searches (its model limited to 120 requests a minute) and serves its metrics; its names."""
    app_config = config.with_name("app.toml")
    app_config.write_text(
        config.read_text().replace("[models.fake_openai]\n", "[models.fake_openai]\nrequests_per_minute = 120\n")
    )
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-c", APP, collection, str(port), str(SEARCHES)],
        cwd=ROOT,
        env=process_env(app_config),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.strip() == "serving", process.stderr.read() if process.stderr else line
        return sample_names(f"http://127.0.0.1:{port}/metrics")
    finally:
        process.communicate(timeout=30)


@pytest.mark.slow
def test_every_metric_the_rules_and_the_dashboard_read_is_in_a_real_scrape(
    tmp_path: Path, broker_redis_url: str, scratch_redis_url: str, postgres_url: str
) -> None:
    redis.Redis.from_url(broker_redis_url).flushdb()
    collection = unique_name("observed")
    port = free_port()
    with FakeOpenAI(dimensions=8) as primary, FakeOpenAI(dimensions=8) as backup:
        crm = CrmTable(postgres_url, f"crm_{collection}")
        try:
            crm.insert([note(i) for i in range(1, RECORDS)])
            crm.insert([{"id": RECORDS, "title": "long", "body": "onboarding " * 5000, "kind": "call"}])
            config = _config(
                tmp_path,
                broker=broker_redis_url,
                cache=scratch_redis_url,
                database=postgres_url,
                primary=primary,
                backup=backup,
                table=crm.name,
                collection=collection,
                metrics_port=port,
            )
            primary.always(delay=0.5)
            backup.always(delay=0.5)
            worker = _worker_scrapes(config, collection, f"http://127.0.0.1:{port}/metrics", primary)
            primary.always()
            app = _app_scrape(config, collection)
        finally:
            crm.close()
    used = used_metric_names()
    assert {"vectorsync_capture_pending", "vectorsync_capture_lag_seconds"} <= used & worker
    missing = sorted(used - worker - app)
    assert missing == [], f"read by the dashboard or the rules, in no scrape: {missing}"
    assert {"vectorsync_search_seconds_bucket", "vectorsync_search_plans_total"} <= app
    assert {"vectorsync_provider_failovers_total", "vectorsync_failed_records"} <= worker


def _first_scrape(url: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """The first answer of a metrics endpoint that is starting: (labels, value) of each sample, by name."""

    def answer() -> str | None:
        try:
            with urllib.request.urlopen(url, timeout=30) as response:
                return str(response.read().decode())
        except (urllib.error.URLError, ConnectionError):
            return None

    text = wait_for(answer, timeout=60, every=0.05, what=f"{url} to answer")
    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((sample.labels, sample.value))
    return samples


def _values(samples: list[tuple[dict[str, str], float]], label: str) -> dict[str, float]:
    return {labels[label]: value for labels, value in samples}


@pytest.mark.slow
def test_a_fresh_workers_first_scrape_holds_every_series_the_rules_and_the_dashboard_read_at_zero(
    tmp_path: Path, broker_redis_url: str, scratch_redis_url: str, postgres_url: str
) -> None:
    redis.Redis.from_url(broker_redis_url).flushdb()
    collection = unique_name("fresh")
    port = free_port()
    with FakeOpenAI(dimensions=8) as primary, FakeOpenAI(dimensions=8) as backup:
        crm = CrmTable(postgres_url, f"crm_{collection}")
        try:
            config = _config(
                tmp_path,
                broker=broker_redis_url,
                cache=scratch_redis_url,
                database=postgres_url,
                primary=primary,
                backup=backup,
                table=crm.name,
                collection=collection,
                metrics_port=port,
            )
            limited = config.read_text().replace("[models.backup]\n", "[models.backup]\nrequests_per_minute = 600\n")
            config.write_text(limited)
            enable(load_settings(config), collection)
            with celery_worker(config, concurrency=1):
                scrape = _first_scrape(f"http://127.0.0.1:{port}/metrics")
            assert primary.calls == backup.calls == 0  # no model called: no task ran
        finally:
            crm.close()
    missing = sorted(used_metric_names() - set(scrape))
    assert missing == [], f"read by the dashboard or the rules, not in a fresh worker's first scrape: {missing}"
    for name in ("vectorsync_provider_failovers_total", "vectorsync_provider_retries_total"):
        assert _values(scrape[name], "model") == {"fake_openai": 0.0, "backup": 0.0}, name
    errors = scrape["vectorsync_model_errors_total"]
    assert {(labels["model"], labels["kind"]) for labels, _ in errors} >= {("backup", "rate_limited")}
    assert {value for _, value in errors} == {0.0}
    assert _values(scrape["vectorsync_rate_limit_wait_seconds_count"], "model") == {"backup": 0.0}
    records = {(labels["collection"], labels["outcome"]): value for labels, value in scrape["vectorsync_records_total"]}
    assert records == {(collection, outcome): 0.0 for outcome in OUTCOMES}
    assert _values(scrape["vectorsync_failed_records"], "collection")[collection] == 0.0  # the database is shared
    assert math.isnan(_values(scrape["vectorsync_run_progress"], "collection")[collection])
    assert set(_values(scrape["vectorsync_runs"], "status")) == set(map(str, RunStatus))
    assert set(_values(scrape["vectorsync_queue_depth"], "queue")) == set(QUEUES)
