"""What `vectorsync doctor` says of a part no settings file or variable placed: ``default``, never ``ok`` (the real
command from a folder with no settings file: tests/integration/producer/cli/test_doctor.py)."""

from __future__ import annotations

import json

import pytest

from producer.cli.doctor import Check, defaulted, render, to_json


def test_a_healthy_part_on_defaults_is_marked_default_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    healthy = Check("broker", "ok", 3.0, "redis://127.0.0.1:6379/0")
    marked = defaulted(healthy, ("broker.url",))
    assert marked.status == "default"
    assert marked.detail == (
        "redis://127.0.0.1:6379/0 (default: broker.url not set in any settings file or VECTORSYNC_* variable)"
    )
    assert defaulted(healthy, ()) == healthy
    broken = defaulted(Check("state database", "fail", 1.0, "no state database", "set state.url"), ("state.url",))
    assert broken.status == "fail" and broken.detail.endswith(
        "(default: state.url not set in any settings file or VECTORSYNC_* variable)"
    )
    render(marked)
    line = capsys.readouterr().out
    assert line.startswith("dflt broker ") and not line.startswith("ok")
    parsed = json.loads(to_json([marked]))
    assert parsed["ok"] is True and parsed["checks"][0]["status"] == "default"
