"""Bad input a person types gets one line naming the value and the fix, and exit code 2: each case here was a
traceback, an endless read or a silent empty answer (issue 32, defect 6)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.backends import unique_name
from tests.crm import store_records
from tests.settings_files import pushed_collection
from tests.workers import ROOT, process_env, run_cli

DEEP_FILTER = '{"$and": [' * 1000 + '{"a": 1}' + "]}" * 1000


def vectorsync(config: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "producer.cli", *args],
        cwd=ROOT,
        env={**process_env(config), **(env or {})},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


def one_line(result: subprocess.CompletedProcess[str], *named: str) -> str:
    """The error, checked: exit 2, one line on stderr, no traceback, every value in ``named`` in it."""
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for value in named:
        assert value in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def config(tmp_path: Path, postgres_url: str) -> Path:
    return pushed_collection(tmp_path, postgres_url, unique_name("docs"), dimensions=8)


def test_a_settings_file_that_is_not_utf8(tmp_path: Path) -> None:
    bad = tmp_path / "latin1.toml"
    bad.write_bytes(b"[embeddings]\n# caf\xe9\ncache_ttl_days = 1\n")
    assert "save it as UTF-8" in one_line(vectorsync(bad, "search", "docs", "q"), str(bad), r"b'\xe9'")


@pytest.mark.parametrize(
    ("variable", "value"), [("VECTORSYNC_EMBEDDINGS__CHAIN", "a,b"), ("VECTORSYNC_COLLECTIONS", "{not json")]
)
def test_an_environment_variable_that_is_not_json(config: Path, variable: str, value: str) -> None:
    line = one_line(vectorsync(config, "search", "docs", "q", env={variable: value}), f"{variable}={value!r}")
    assert "takes JSON" in line


@pytest.mark.parametrize(
    ("section", "setting", "value"),
    [
        ("embeddings", "cache_ttl_days", "inf"),
        ("network", "tcp_user_timeout", "inf"),
        ("network", "tcp_user_timeout", "1e300"),
        ("embeddings", "cache_ttl_days", "nan"),
    ],
)
def test_a_number_setting_that_is_not_finite_or_too_large(config: Path, section: str, setting: str, value: str) -> None:
    text = config.read_text().replace(f"{setting} = 0\n", "")
    config.write_text(
        text.replace(f"[{section}]\n", f"[{section}]\n{setting} = {value}\n")
        if f"[{section}]\n" in text
        else text + f"\n[{section}]\n{setting} = {value}\n"
    )
    one_line(vectorsync(config, "search", "docs", "q"), f"{section}.{setting}")


def test_a_filter_nested_a_thousand_levels(config: Path) -> None:
    assert "nested too deep to read" in one_line(
        vectorsync(config, "search", "docs", "q", "--filter", DEEP_FILTER), '--filter \'{"$and"'
    )


def test_an_eval_line_nested_a_thousand_levels(config: Path, tmp_path: Path) -> None:
    queries = tmp_path / "queries.jsonl"
    queries.write_text('{"query": "refunds", "relevant": ["1"]}\n' + DEEP_FILTER + "\n")
    result = vectorsync(config, "eval", "docs", "-q", str(queries))
    assert result.returncode == 2 and "line 2: nested too deep to read" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_min_score_nan_is_refused(config: Path) -> None:
    """It was taken, and no score is at least nan: an empty answer that looked like no match."""
    name = next(line for line in config.read_text().splitlines() if line.startswith("[collections."))[13:-8]
    store_records(config, name, [("1", "refunds take five days", {})])
    assert "use a finite number" in one_line(
        vectorsync(config, "search", name, "refunds", "--min-score", "nan"), "min_score nan"
    )


def test_an_endless_queries_file_is_read_to_a_bound(config: Path) -> None:
    assert "split it" in one_line(vectorsync(config, "eval", "docs", "-q", "/dev/zero"), "'/dev/zero'", "MiB")


def test_cli_errors_are_one_line_without_a_traceback(tmp_path: Path) -> None:
    config = tmp_path / "vectorsync.toml"
    config.write_text('[vectors]\nmetric = "cosin"\n')
    result = run_cli(config, "status")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().startswith("error: bad settings in")
    assert len(result.stderr.strip().splitlines()) == 1 or "vectors.metric" in result.stderr
    bad_filter = run_cli(config, "search", "notes", "hello", "--filter", "{kind")
    assert bad_filter.returncode == 2 and "Traceback" not in bad_filter.stderr
