"""Four worker processes share one rate limit: the provider never sees more than the budget allows.

Two ``celery worker`` processes of two pool processes each index pushed
documents, one provider call each, against the fake OpenAI server with
``requests_per_minute = 60``. Unlimited, they would make every call within a
second; limited, the calls come as a token bucket allows: at most a full
bucket (10 seconds of the rate) plus one a second, in every window.
"""

from __future__ import annotations

import re
import urllib.request
import uuid
from contextlib import ExitStack
from pathlib import Path

import pytest
from celery import Celery

from store.broker.config import celery_config
from store.broker.producer import Producer
from store.calls.ratelimit import BURST_SECONDS
from store.settings import load_settings
from tests.backends import unique_name
from tests.crm import stored_chunks
from tests.fake_openai import FakeOpenAI
from tests.services import free_port
from tests.settings_files import worker_sections
from tests.workers import celery_worker, wait_for

pytestmark = pytest.mark.slow
#: The limit under test, and how many more documents than a full bucket are sent (one call each).
REQUESTS_PER_MINUTE = 60
BEYOND_THE_BURST = 14


def config_text(
    *, broker: str, cache: str, database: str, openai_url: str, model: str, collection: str, metrics_port: int
) -> str:
    return f"""
{worker_sections(broker=broker, database=database, dimensions=8, metrics_port=metrics_port)}
[cache]
url = "{cache}"

[models.fake_openai]
provider = "openai"
model = "{model}"
dimensions = 8
base_url = "{openai_url}"
timeout = 5
requests_per_minute = {REQUESTS_PER_MINUTE}

[embeddings]
chain = ["fake_openai"]
cache_ttl_days = 0

[collections.{collection}.source]
kind = "push"
"""


def test_four_worker_processes_stay_within_requests_per_minute(
    tmp_path: Path, broker_redis_url: str, redis_url: str, postgres_url: str
) -> None:
    rate = REQUESTS_PER_MINUTE / 60
    burst = int(REQUESTS_PER_MINUTE / 60 * BURST_SECONDS)
    documents = burst + BEYOND_THE_BURST
    collection = unique_name("limited")
    ports = [free_port(), free_port()]
    with FakeOpenAI(dimensions=8) as server, ExitStack() as workers:
        # A model name of this test's own: a bucket no other run shares.
        options = dict(
            broker=broker_redis_url,
            cache=redis_url,
            database=postgres_url,
            openai_url=server.url,
            model=f"text-embedding-{uuid.uuid4().hex[:12]}",
            collection=collection,
        )
        configs = []
        for index, port in enumerate(ports):
            configs.append(tmp_path / f"worker{index}.toml")
            configs[-1].write_text(config_text(**options, metrics_port=port))
        for index, config in enumerate(configs):
            workers.enter_context(celery_worker(config, concurrency=2, name=f"limited{index}"))
        settings = load_settings(configs[0])
        app = Celery("vectorsync-test", set_as_current=False)
        app.conf.update(celery_config(settings))
        workers.callback(app.close)
        wait_for(lambda: len(app.control.ping(timeout=0.5)) == 2, timeout=30, what="both workers to answer")
        producer = Producer(settings)
        for i in range(documents):
            producer.index_document(collection, i, f"note {i} about the renewal call")
        producer.close()
        wait_for(
            lambda: len(server.arrivals()) >= documents,
            timeout=documents / rate + 10,
            what=f"{documents} provider calls",
        )
        wait_for(
            lambda: len(stored_chunks(postgres_url, f"vs_{collection}")) == documents,
            timeout=10,
            what="every document to be stored: calls wait for the budget, none is refused",
        )
        scraped = urllib.request.urlopen(f"http://127.0.0.1:{ports[0]}/metrics", timeout=10).read().decode()
    times = server.arrivals()
    print(
        f"{len(times)} calls over {times[-1] - times[0]:.1f}s, at most {server.busiest(BURST_SECONDS)} in "
        f"{BURST_SECONDS:g}s, first {burst} within {times[burst - 1] - times[0]:.2f}s; waited {waited_text(scraped)}"
    )
    assert len(times) == documents
    over = [
        f"{j - i + 1} calls in {times[j] - times[i]:.2f}s"
        for i in range(len(times))
        for j in range(i, len(times))
        if j - i + 1 > burst + rate * (times[j] - times[i]) + 1
    ]
    assert over == []
    # The budget was spent, not refused: the calls past the burst came at about the rate.
    assert times[-1] - times[0] >= (documents - burst - 1) / rate
    assert server.busiest(BURST_SECONDS) <= burst + rate * BURST_SECONDS + 1
    assert float(waited_text(scraped)) > 0, scraped[-2000:]


def waited_text(scraped: str) -> str:
    """The seconds waited for the budget, as one worker's metrics say ("0" when they do not)."""
    found = re.search(r'vectorsync_rate_limit_wait_seconds_sum\{model="fake_openai"\} ([0-9.e+]+)', scraped)
    return found.group(1) if found else "0"
