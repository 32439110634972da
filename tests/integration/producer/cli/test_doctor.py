"""`vectorsync doctor` as a user sees it: one line per part with its fix, each part down in turn, and every form of
broker reached as the workers reach it (real Redis, RabbitMQ, PostgreSQL with pgvector)."""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from store.contract import WORKER_COMMAND
from tests.integration.producer.cli.test_operations import Ops, ops
from tests.services import REDIS_FORMS, free_port, redis_server, sentinel_group
from tests.workers import (
    ROOT,
    celery_worker,
    child_env,
    run_cli,
)

pytestmark = pytest.mark.slow
__all__ = ["ops"]  # the fixture, shared with test_operations.py
DEAD = f"127.0.0.1:{free_port()}"


def doctor_lines(config: Path) -> tuple[int, dict[str, str]]:
    result = run_cli(config, "doctor", timeout=120)
    lines = {}
    for line in result.stdout.splitlines():
        match = re.match(r"(ok|dflt|warn|FAIL)\s+(.+?)\s{2,}\s*\d+ ms\s+(.*)", line)
        if match:
            lines[match.group(2).strip()] = f"{match.group(1)} {match.group(3)}"
    return result.returncode, lines


def test_doctor_with_everything_up_then_each_part_down(ops: Ops) -> None:
    with celery_worker(ops.config):
        code, lines = doctor_lines(ops.config)
        assert code == 0, lines
        assert set(lines) == {
            "broker",
            "state database",
            "vector store (pgvector)",
            "cache",
            "model fake_openai",
            "workers",
        }
        assert all(line.startswith("ok ") for line in lines.values()), lines
        assert re.match(r"ok pgvector 0\.(8|9|1\d)\.\d+, \d+ collections", lines["vector store (pgvector)"])
        assert "8 dimensions" in lines["model fake_openai"]
        assert "1 answer (w1@" in lines["workers"] and "vectorsync.bulk,vectorsync.live" in lines["workers"]

        as_json = json.loads(run_cli(ops.config, "doctor", "--json").stdout)
        assert as_json["ok"] is True and {c["status"] for c in as_json["checks"]} == {"ok"}
        if ops.settings.broker.url.startswith("redis"):  # the other parts do not depend on the broker: once
            _each_other_part_down(ops)

    code, lines = doctor_lines(ops.config)  # the worker has stopped
    assert code == 1 and lines["workers"] == f"FAIL no worker answers a ping → fix: start one: {WORKER_COMMAND}"

    code, lines = doctor_lines(ops.variant("broker", f"redis://{DEAD}/0"))
    assert (
        code == 1
        and lines["broker"].startswith("FAIL")
        and "fix: start the broker, or fix broker.url" in lines["broker"]
    )
    assert lines["workers"].startswith("FAIL not asked: the broker is down")


@pytest.mark.parametrize("form", [*REDIS_FORMS, "unix", "sentinel", "memory"])
def test_doctor_reaches_every_form_of_broker_and_says_how_it_hands_tasks_over(tmp_path: Path, form: str) -> None:
    """TLS verifying the server, a Unix socket in both spellings, a Sentinel's master: doctor connects as the
    workers do and says the take is atomic; a broker vectorsync does not test is a warning that says so."""
    with contextlib.ExitStack() as stack:
        if form == "sentinel":
            url = stack.enter_context(sentinel_group(tmp_path / "sentinel")).url
        elif form == "memory":
            url = "memory://"
        else:
            url, _ = stack.enter_context(redis_server(form="socket" if form == "unix" else form, folder=tmp_path))
            url = url.replace("redis+socket://", "unix://") if form == "unix" else url
        config = tmp_path / "vectorsync.toml"
        config.write_text(f'[broker]\nurl = "{url}"\n\n[cache]\nurl = "memory://"\n')
        _code, lines = doctor_lines(config)
    if form == "memory":
        assert lines["broker"].startswith("warn memory://: kombu's own 'memory' transport, untested"), lines
        assert "fix: use a Redis or RabbitMQ broker" in lines["broker"]
        return
    where = {"tcp": "TCP", "tls": "TLS", "socket": "a Unix socket", "unix": "a Unix socket"}.get(form, "the master")
    assert lines["broker"].startswith("ok "), lines
    assert f"Redis over {where}" in lines["broker"] and lines["broker"].endswith("tasks taken atomically"), lines


def test_doctor_with_no_settings_file_marks_each_default_part_as_a_default(tmp_path: Path) -> None:
    """Run from a folder with no settings file: the broker at the default URL (a Redis that happens to run there,
    or none) and the ``fake`` model are nobody's choice, and doctor says so instead of a healthy ``ok``."""
    env = {**child_env(), "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-m", "producer.cli", "doctor", "--json"],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    found = {check["part"]: check for check in json.loads(result.stdout)["checks"]}
    note = "not set in any settings file or VECTORSYNC_* variable)"
    broker = found["broker"]
    assert broker["status"] in ("default", "fail") and broker["detail"].endswith(f"(default: broker.url {note}"), broker
    model = found["model fake"]
    assert model["status"] == "default", model
    assert model["detail"] == f"fake fake, 1536 dimensions, at local (default: embeddings.chain and models {note}"
    assert found["vector store (pgvector)"]["status"] == "fail"
    assert all(check["status"] != "ok" for part, check in found.items() if part != "workers"), found


def _each_other_part_down(ops: Ops) -> None:
    ops.openai.push(status=401, message="Incorrect API key provided")
    code, lines = doctor_lines(ops.config)
    assert code == 1
    assert lines["model fake_openai"].startswith("FAIL PermanentError: model 'text-embedding-test'")
    assert "fix: check models.fake_openai" in lines["model fake_openai"]

    variants = {
        "cache": ("cache", f"redis://{DEAD}/0", 0, "warn", "fix: start Redis or fix cache.url"),
        "state database": ("state", f"postgresql://{DEAD}/x", 1, "FAIL", "fix: start PostgreSQL"),
        "flower": ("flower", f"http://{DEAD}", 0, "warn", "fix: start Flower"),
    }
    for part, (section, url, expected_code, status, fix) in variants.items():
        code, lines = doctor_lines(ops.variant(section, url))
        assert code == expected_code, (part, lines)
        assert lines[part].startswith(status) and fix in lines[part], lines[part]
    store_down = ops.variant("state", ops.settings.vectors.url or "")  # the state stays where it is ...
    store_down.write_text(
        re.sub(
            r'(\[vectors\]\nstore = "pgvector"\nurl = )"[^"]*"', rf'\1"postgresql://{DEAD}/x"', store_down.read_text()
        )
    )  # ... the store is gone
    code, lines = doctor_lines(store_down)
    assert code == 1 and lines["state database"].startswith("ok")
    assert (
        lines["vector store (pgvector)"].startswith("FAIL")
        and "fix: start it, or fix vectors.url" in lines["vector store (pgvector)"]
    )
