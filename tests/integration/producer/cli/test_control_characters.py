"""Terminal escape sequences in stored ids, texts, metadata, failures and runs reach no terminal through the CLI:
every command that prints them shows them escaped (``\\x1b``, ``\\u202e``), and ``--json`` escapes them too;
an error naming a 5,000-character collection name shows its start and its length (issue 48, defects 4 and 9e).

Real parts: the records are stored in pgvector, the failure and the run in the state database, and each command
runs as a script runs it (its output to a pipe).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from store.state.ledger.postgres import PostgresLedger
from tests.backends import unique_name
from tests.crm import store_records
from tests.settings_files import pushed_collection
from tests.workers import run_cli

#: An OSC 8 hyperlink, a screen clear, a window title, an 8-bit CSI (C1) and a right-to-left override.
LINK = "\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\"
CLEAR = "\x1b[2J"
TITLE = "\x1b]0;title\x07"
CSI8 = "\x9b2J"
RLO = "\u202e"
#: What must never reach the output: C0 controls but newline, DEL, C1 controls, bidi controls.
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
#: The same for ``--json``, where DEL (valid JSON, ignored by terminals) is left as json.dumps leaves it.
RAW_IN_JSON = re.compile("[\x00-\x09\x0b-\x1f\x80-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")

RECORD = f"rec{CLEAR}{RLO}\n1"  # a newline too: an id is shown on its one line, "\n" escaped
TEXT = f"refunds {LINK} are paid {TITLE} within 14 days {CSI8} to the card {RLO}"
METADATA = {"note": f"{TITLE}{CSI8}{RLO}"}
ERROR = f"refused {LINK} {CLEAR}"


@dataclass
class Rig:
    config: Path
    collection: str
    run_id: str


@pytest.fixture
def rig(tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> Rig:
    monkeypatch.setenv("COLUMNS", "1000")  # tables on one line each, so an escape is never folded in two
    collection = unique_name("ctl")
    config = pushed_collection(tmp_path, postgres_url, collection, dimensions=64, keywords=True)
    store_records(config, collection, [(RECORD, TEXT, METADATA), ("plain", "invoices are emailed monthly", {})])
    ledger = PostgresLedger(postgres_url)
    try:
        ledger.record_failure(collection, RECORD, ERROR, run_id=None)
        run_id = ledger.create_run(collection, run_id=f"{TITLE}{unique_name('run')}{CLEAR}")
        ledger.fail_run(run_id, f"boom {CLEAR}{RLO}{CSI8}")
    finally:
        ledger.close()
    return Rig(config, collection, run_id)


def _printed(rig: Rig, *args: str) -> str:
    result = run_cli(rig.config, *args)
    assert "Traceback" not in result.stderr, result.stderr
    return result.stdout + result.stderr


def _assert_escaped(printed: str, *shown: str) -> None:
    raw = sorted({f"U+{ord(c):04X}" for c in RAW.findall(printed)})
    assert raw == [], f"raw control characters reached the output: {raw}\n{printed!r}"
    for text in shown:
        assert text in printed, f"{text!r} not shown in:\n{printed}"


@pytest.mark.parametrize(
    ("args", "shown"),
    [
        (("search", "{c}", "refunds"), [r"rec\x1b[2J\u202e\n1", r"\x1b]8;;http://evil\x1b\link"]),
        (("explain", "{c}", RECORD), [r"rec\x1b[2J\u202e\n1", r"\x1b]0;title\x07", r"refused \x1b]8;;"]),
        (("failures", "--collection", "{c}"), [r"rec\x1b[2J\u202e\n1", r"refused \x1b]8;;http://evil"]),
        (("verify", "{c}"), [r"rec\x1b[2J\u202e\n1"]),
        (("ask", "{c}", "how are refunds paid within 14 days?"), [r"\x1b]0;title\x07", r"\u202e"]),
        (("status",), [r"\x1b]0;titl"]),  # the run's shortest unique prefix, 8 characters
        (("status", "{run}"), [r"boom \x1b[2J\u202e\x9b2J"]),
    ],
    ids=["search", "explain", "failures", "verify", "ask", "status", "status run"],
)
def test_escape_sequences_in_stored_data_are_printed_escaped(rig: Rig, args: tuple[str, ...], shown: list[str]) -> None:
    argv = [a.format(c=rig.collection, run=rig.run_id) for a in args]
    _assert_escaped(_printed(rig, *argv), *shown)


def test_eval_names_a_queries_file_escaped(rig: Rig, tmp_path: Path) -> None:
    queries = tmp_path / f"q{CLEAR}.jsonl"
    queries.write_text(json.dumps({"query": "refunds", "relevant": [RECORD]}) + "\n")
    _assert_escaped(_printed(rig, "eval", rig.collection, "--queries", str(queries)), r"q\x1b[2J.jsonl")


@pytest.mark.parametrize(
    "args",
    [
        ("explain", "{c}", RECORD, "--json"),
        ("verify", "{c}", "--json"),
        ("ask", "{c}", "how are refunds paid within 14 days?", "--json"),
        ("status", "{run}", "--json"),
    ],
    ids=["explain", "verify", "ask", "status"],
)
def test_json_output_escapes_them_and_reads_back_whole(rig: Rig, args: tuple[str, ...]) -> None:
    result = run_cli(rig.config, *[a.format(c=rig.collection, run=rig.run_id) for a in args])
    raw = sorted({f"U+{ord(c):04X}" for c in RAW_IN_JSON.findall(result.stdout)})
    assert raw == [], f"raw control characters in --json: {raw}"
    decoded = "".join(_strings(json.loads(result.stdout)))
    assert CLEAR in decoded or TITLE in decoded, decoded  # escaped, not lost: JSON reads back the stored text


def _strings(value: object) -> list[str]:
    """Every string in decoded JSON, keys included."""
    if isinstance(value, dict):
        return [s for key, item in value.items() for s in (key, *_strings(item))]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return [value] if isinstance(value, str) else []


@pytest.mark.parametrize(
    "args", [("search", "{n}", "q"), ("index", "{n}", "1"), ("reindex", "{n}"), ("collections", "create", "{n}")]
)
def test_an_error_shows_the_start_of_a_long_collection_name_and_its_length(rig: Rig, args: tuple[str, ...]) -> None:
    result = run_cli(rig.config, *[a.format(n="a" * 5000) for a in args])
    assert result.returncode == 2, result.stdout + result.stderr
    assert "a" * 61 not in result.stderr and "(5,000 characters)" in result.stderr, result.stderr
