"""Values from users, sources and the state database are printed literally by every command and in every
error: "[/b]" in a failed record's id made `vectorsync failures` crash with Rich's MarkupError, and a filter
field "[link=...]click[/link]" was rewritten into "click" with a hyperlink (issue 32, defect 5)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from store.state.ledger import RunProgress, RunStatus
from store.state.ledger.postgres import PostgresLedger
from tests.backends import unique_name
from tests.settings_files import pushed_collection
from tests.workers import run_cli

MARKUP = "x[/b]"
LINK = "[link=http://evil.test]click[/link]"


@pytest.fixture
def config(tmp_path: Path, postgres_url: str) -> tuple[Path, str]:
    name = unique_name("docs")
    return pushed_collection(tmp_path, postgres_url, name, dimensions=8), name


def test_failures_print_a_record_id_and_an_error_holding_markup_as_they_are(
    config: tuple[Path, str], postgres_url: str
) -> None:
    path, name = config
    ledger = PostgresLedger(postgres_url)
    ledger.record_failure(name, MARKUP, f"refused: {LINK}", run_id=None)
    ledger.close()
    shown = run_cli(path, "failures", "--collection", name)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert MARKUP in shown.stdout and "[link=http://evil" in shown.stdout, shown.stdout  # the error cut to its column
    retried = run_cli(path, "failures", "--collection", name, "--retry")
    assert "MarkupError" not in retried.stderr and retried.returncode == 0, retried.stdout + retried.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("search", "{name}", "refunds", "--filter", '{{"a[/b]": 1}}'),
        ("search", "{name}", "refunds", "--filter", '{{"' + LINK + '": 1}}'),
        ("search", "x[/y]", "refunds"),
        ("index", "x[/y]", "1"),
        ("status", "zz[/x]"),
    ],
    ids=["filter field", "filter field with a link", "search collection", "index collection", "status run"],
)
def test_a_bad_value_holding_markup_is_named_literally_in_its_error(
    config: tuple[Path, str], args: tuple[str, ...]
) -> None:
    path, name = config
    argv = [a.format(name=name) for a in args]
    result = run_cli(path, *argv)
    value = next(a for a in argv if "[" in a)
    key = value if not value.startswith("{") else value[2 : value.index('":')]
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and key in result.stderr, result.stderr


def test_a_run_whose_error_holds_markup_is_summed_up_literally() -> None:
    """``reindex --wait``'s last line, on the CLI's own console."""
    from producer.cli import progress

    now = datetime.now(UTC)
    with progress.out.capture() as printed:
        progress.summary(
            RunProgress(
                run_id="r1",
                collection="docs",
                status=RunStatus.FAILED,
                total=1,
                done=0,
                skipped=0,
                failed=1,
                full=False,
                started_at=now,
                finished_at=now,
                error=f"boom {MARKUP}",
            )
        )
    assert f"failed: 1 records, 0 indexed, 0 unchanged, 1 failed in 0.0s — boom {MARKUP}" in printed.get()
