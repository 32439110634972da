"""Embedding providers failing under a reindex: outages, a 429 storm, slow answers, broken answers."""

from __future__ import annotations

import itertools
import threading
import time
from pathlib import Path

from tests.crm import note
from tests.reliability.conftest import Rig, make_rig
from tests.workers import run_cli


def _reindex(rig: Rig) -> str:
    result = run_cli(rig.config, "reindex", rig.collection)
    assert result.returncode == 0, result.stderr
    return result.stdout.split()[1]


def _later(seconds: float, action: object) -> threading.Timer:
    timer = threading.Timer(seconds, action)  # type: ignore[arg-type]
    timer.start()
    return timer


def test_outages_the_primary_down_30_s_and_every_model_down_a_minute(tmp_path: Path, postgres_url: str) -> None:
    """Two systems side by side, so that the two outages share their minute."""
    with make_rig(tmp_path / "one", postgres_url) as one, make_rig(tmp_path / "all", postgres_url) as every:
        one.crm.insert([note(i) for i in range(1, 401)])
        every.crm.insert([note(i) for i in range(1, 301)])
        one.primary.always(status=503)
        for server in (every.primary, every.backup):
            server.always(status=503)
        with one.worker("one", concurrency=1), every.worker("every", concurrency=1):
            _reindex(one)
            _reindex(every)
            timers = [_later(30, one.primary.always), _later(60, every.primary.always), _later(60, every.backup.always)]
            one.verify("primary down 30 s (failover to the backup)", faults=1, timeout=120)
            assert one.backup.calls > 0
            timers[0].join()
            time.sleep(one.settings.embeddings.cooldown_seconds + 0.5)
            before = one.primary.calls
            one.crm.update(7, body="edited once the primary is back")
            assert run_cli(one.config, "index", one.collection, "7").returncode == 0
            one.verify("primary back after its cool-down", faults=0)
            assert one.primary.calls > before  # the chain's first model serves again
            every.verify("every model down for 60 s", faults=2, timeout=240)  # and none in failures
            for timer in timers:
                timer.join()


def test_a_429_storm_with_retry_after_is_waited_out_with_bounded_calls(rig: Rig) -> None:
    rig.crm.insert([note(i) for i in range(1, 201)])
    storm = 40
    for _ in range(storm):
        rig.primary.push(status=429, headers={"Retry-After": "1"})
    with rig.worker(concurrency=1):
        _reindex(rig)
        rig.verify(f"429 storm of {storm} answers with Retry-After: 1", faults=storm, timeout=180)
    waves: list[list[float]] = []  # requests sent together (the batcher's parallel calls) form a wave
    for at in (r.at for r in rig.primary.requests):
        if waves and at - waves[-1][-1] < 0.2:
            waves[-1].append(at)
        else:
            waves.append([at])
    assert all(b[0] - a[-1] >= 1.0 for a, b in itertools.pairwise(waves))  # Retry-After honoured
    parallel = rig.settings.embeddings.parallelism
    assert all(len(wave) <= parallel for wave in waves)  # bounded: never more than one wave in flight


def test_answers_slower_than_the_timeout_are_retried(rig: Rig) -> None:
    rig.crm.insert([note(i) for i in range(1, 201)])
    for _ in range(6):
        rig.primary.push(delay=2.0)  # past models.primary.timeout (1 s)
    with rig.worker(concurrency=2):
        _reindex(rig)
        rig.verify("6 answers slower than the timeout", faults=6)


def test_nan_answers_fail_over_and_poison_nothing(rig: Rig) -> None:
    rig.crm.insert([note(i) for i in range(1, 201)])
    rig.primary.always(nan=True)
    with rig.worker(concurrency=2):
        _reindex(rig)
        rig.verify("NaN answers from the primary", faults=1)
    assert rig.backup.calls > 0


def test_fewer_vectors_than_inputs_fail_over(rig: Rig) -> None:
    rig.crm.insert([note(i) for i in range(1, 201)])
    rig.primary.always(drop=1)
    with rig.worker(concurrency=2):
        _reindex(rig)
        rig.verify("one vector too few from the primary", faults=1)
    assert rig.backup.calls > 0
