"""A fuzzer on the inputs a person types: command-line arguments, settings (file and environment), eval files,
pushed documents and their metadata. Each must end in a result or in one line that names the fault (exit 2, or
ConfigError): never a traceback, and never the loss of what is stored. A refusal names one of the values typed,
as typed or quoted (a long one by its beginning).

Fixed seed (derandomized) and ``VECTORSYNC_FUZZ_EXAMPLES`` examples per input (50 here, in CI); run longer with
``VECTORSYNC_FUZZ_EXAMPLES=2000 pytest tests/unit/test_fuzz_inputs.py``. What it found is fixed and kept as
regression tests (tests/unit/store/broker/test_refusals.py: `vectorsync index` of a pushed collection;
tests/unit/producer/cli/test_values.py: an id that starts with "-", a --filter that is JSON but no object).
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from producer import testing
from producer.cli.app import app
from store.errors import ConfigError
from store.evaluation.queries import parse_queries
from store.process.defaults import use_client
from store.settings import load_settings
from store.vectors.records import clean_text

EXAMPLES = int(os.environ.get("VECTORSYNC_FUZZ_EXAMPLES", "50"))
FUZZ = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

#: Text a careless user or an attacker types: markup, NUL, lone surrogates, control characters, long runs.
NASTY = st.one_of(
    st.text(max_size=40),
    st.sampled_from(
        [
            "[/b]",
            "[link=http://evil.test]click[/link]",
            "nul\x00id",
            "sur\ud800",
            "\xff\xfe",
            "-1",
            "nan",
            "inf",
            "1e309",
            "",
            " ",
            "{",
            '{"a":',
            "x" * 5000,
            "../../etc/passwd",
            "$(reboot)",
        ]
    ),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=20),
)
#: JSON a filter or a query line might hold, deep and wide.
JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | NASTY,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(NASTY, inner, max_size=4),
    max_leaves=20,
)

CONFIG = """
[vectors]
store = "memory"
dimensions = 8
[broker]
url = "memory://"
[embeddings]
cache_ttl_days = 0
[collections.docs.source]
kind = "push"
"""


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("fuzz") / "vectorsync.toml"
    path.write_text(CONFIG)
    return path


def vectorsync(config: Path, *args: str) -> Any:
    """``vectorsync --config CONFIG ARGS`` in this process, with a client of its own (not one an earlier test
    of this process left as the default, over other settings), closed after."""
    previous = use_client(None)
    try:
        return CliRunner().invoke(app, ["--config", str(config), *args], catch_exceptions=True)
    finally:
        built = use_client(previous)
        if built is not None:
            built.close()


def assert_one_line_or_result(result: Any, args: tuple[str, ...]) -> None:
    """Exit 0 (a result) or 2 (refused in one line, or by the argument parser's usage box); no traceback."""
    assert result.exception is None or isinstance(result.exception, SystemExit), (args, repr(result.exception))
    assert result.exit_code in (0, 2), (args, result.exit_code, result.output)
    assert "Traceback" not in result.output, (args, result.output)
    if result.exit_code == 2 and "Usage:" not in result.output:
        errors = [line for line in result.output.splitlines() if line.startswith("error: ")]
        assert len(errors) == 1, (args, result.output)
    if result.exit_code == 2:
        assert any(_named(value, result.output) for value in args[1:]), (args, result.output)


def _named(value: str, output: str) -> bool:
    """Whether ``output`` names ``value``: as typed, or quoted as Python quotes it (escapes shown), or its
    beginning when it is long (messages shorten a value of thousands of characters)."""
    flat = " ".join(output.split())  # the usage box wraps lines
    forms = {value, repr(value), repr(value)[1:-1], ascii(value)[1:-1]}
    return any(form and (form in output or form in flat or form[:40] in flat) for form in forms)


@FUZZ
@given(
    query=NASTY,
    filter=st.none() | NASTY | JSONISH.map(json.dumps),
    limit=st.none() | NASTY,
    min_score=st.none() | NASTY,
    mode=st.none() | NASTY,
    collection=st.just("docs") | NASTY,
)
def test_search_arguments(
    config: Path,
    query: str,
    filter: str | None,
    limit: str | None,
    min_score: str | None,
    mode: str | None,
    collection: str,
) -> None:
    args: tuple[str, ...] = ("search", collection, query)
    for option, value in (("--filter", filter), ("--limit", limit), ("--min-score", min_score), ("--mode", mode)):
        if value is not None:
            args += (option, value)
    assert_one_line_or_result(vectorsync(config, *args), args)


@FUZZ
@given(collection=st.just("docs") | NASTY, ids=st.lists(NASTY, min_size=1, max_size=3))
def test_index_and_reindex_arguments(config: Path, collection: str, ids: list[str]) -> None:
    for args in (("index", collection, *ids), ("reindex", collection), ("collections", "recount", collection)):
        assert_one_line_or_result(vectorsync(config, *args), args)


ENV_NAMES = [
    "VECTORSYNC_EMBEDDINGS__CHAIN",
    "VECTORSYNC_COLLECTIONS",
    "VECTORSYNC_WORKER__BATCH_SIZE",
    "VECTORSYNC_NETWORK__TCP_USER_TIMEOUT",
]
_SETTINGS = st.dictionaries(
    st.sampled_from(["worker", "embeddings", "network", "limits", "broker", "vectors", "cache"]),
    st.dictionaries(
        st.sampled_from(
            [
                "time_limit",
                "batch_size",
                "cache_ttl_days",
                "tcp_user_timeout",
                "url",
                "max_id_chars",
                "dimensions",
                "store",
                "chain",
                "metric",
                "nosuch",
            ]
        ),
        st.integers() | st.floats() | st.text(max_size=20) | st.booleans() | st.lists(st.text(max_size=5), max_size=3),
        max_size=3,
    ),
    max_size=3,
)


@FUZZ
@given(
    sections=_SETTINGS,
    env=st.dictionaries(
        st.sampled_from(ENV_NAMES), NASTY.filter(lambda v: "\x00" not in v and not _surrogates(v)), max_size=2
    ),
)
def test_settings_from_the_file_and_the_environment(
    tmp_path: Path, sections: dict[str, dict[str, Any]], env: dict[str, str]
) -> None:
    path = tmp_path / "fuzzed.toml"
    path.write_text(
        "\n".join(
            f"[{name}]\n" + "".join(f"{key} = {_toml(value)}\n" for key, value in values.items())
            for name, values in sections.items()
        )
    )
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        load_settings(path)
    except ConfigError as exc:
        assert "\n" not in str(exc).split(": ", 1)[0]
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@FUZZ
@given(lines=st.lists(NASTY | JSONISH.map(json.dumps), min_size=1, max_size=5))
def test_eval_query_lines(lines: list[str]) -> None:
    with contextlib.suppress(ConfigError):
        parse_queries(lines, source="fuzzed.jsonl")


@FUZZ
@given(documents=st.lists(st.tuples(NASTY, NASTY, JSONISH), min_size=1, max_size=4))
def test_pushed_documents_and_their_metadata(documents: list[tuple[str, str, Any]]) -> None:
    """Each is refused at once (ConfigError) or indexed; a refused one never costs its batch-mates, and what was
    stored before stays."""
    with testing.queue(
        {"vectors": {"store": "memory", "dimensions": 8}, "collections": {"docs": {"source": {"kind": "push"}}}}
    ) as queue:
        queue.producer.index_document("docs", "kept", "a document stored before")
        queue.run_queue()
        accepted: dict[str, str] = {}
        for doc_id, text, metadata in documents:
            try:
                accepted[queue.producer.index_document("docs", doc_id, text, metadata)] = text
            except ConfigError:
                continue
        queue.run_queue()
        stored = {
            m.id.rsplit(":", 1)[0] for m in queue.store.get_collection("docs", create=True).search("a", limit=100)
        }
        failed = {f.record_id for f in queue.ledger.failures("docs")}
        assert "kept" in stored
        assert {d for d, text in accepted.items() if clean_text(text).strip()} - failed <= stored  # blank: no chunk


def _surrogates(text: str) -> bool:
    return any(0xD800 <= ord(c) <= 0xDFFF for c in text)


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return {"nan": "nan", "inf": "inf", "-inf": "-inf"}.get(str(value), repr(value))
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return str(value)
