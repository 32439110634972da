"""A queries file is checked whole before anything runs: each kind of bad line named with its number."""

from __future__ import annotations

from pathlib import Path

import pytest

from store.errors import ConfigError
from store.evaluation import EvalQuery, load_queries, parse_queries
from store.evaluation.queries import MAX_REPORTED
from store.vectors import Filter

GOOD = '{"query": "refunds", "relevant": ["42"]}'


def refused(*lines: str) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_queries(lines, source="q.jsonl")
    return str(caught.value)


def test_good_lines_become_queries_with_their_line_numbers(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text(
        f'{GOOD}\n\n{{"query": "acme", "relevant": ["1", "2"], "filter": {{"tenant": "acme"}}}}\n'
        '{"query": "any", "relevant": ["3"], "filter": null}\n'
    )
    queries = load_queries(path)
    assert queries == [
        EvalQuery("refunds", ("42",), None, 1),
        EvalQuery("acme", ("1", "2"), {"tenant": "acme"}, 3),
        EvalQuery("any", ("3",), None, 4),
    ]
    assert queries[1].search_filter() == Filter.eq("tenant", "acme")
    assert queries[0].search_filter() is None


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('{"query": "x", "relevant": ["1"]', "line 2: not JSON (Expecting ',' delimiter at column 33)"),
        ('["x", ["1"]]', "line 2: a JSON object is expected, got list"),
        ('{"relevant": ["1"]}', "line 2: missing key(s) 'query'"),
        ('{"query": "x"}', "line 2: missing key(s) 'relevant'"),
        (
            '{"query": "x", "relevant": ["1"], "k": 3}',
            "line 2: unknown key(s) 'k': use only query, relevant and filter",
        ),
        ('{"query": 7, "relevant": ["1"]}', "line 2: 'query' must be a string, got int 7"),
        ('{"query": "  ", "relevant": ["1"]}', "line 2: 'query' is empty: write the text a user would search for"),
        ('{"query": "x", "relevant": "1"}', "line 2: 'relevant' must be a list of record ids, got str \"1\""),
        (
            '{"query": "x", "relevant": []}',
            "line 2: 'relevant' is empty: name at least one record id that answers the query",
        ),
        (
            '{"query": "x", "relevant": [1]}',
            "line 2: 'relevant' must hold non-empty strings (record ids, quoted), got int 1",
        ),
        ('{"query": "x", "relevant": ["1", "1"]}', "line 2: 'relevant' names '1' more than once"),
        (
            '{"query": "x", "relevant": ["1"], "filter": "kind=call"}',
            'line 2: \'filter\' must be a JSON object like {"kind": "call"}, got str "kind=call"',
        ),
        (
            '{"query": "x", "relevant": ["1"], "filter": {"bad field!": 1}}',
            "line 2: bad 'filter': filter field 'bad field!' is not allowed",
        ),
        ('{"query": "x", "relevant": ["1"], "filter": {"n": {"$near": 2}}}', "line 2: bad 'filter': "),
    ],
)
def test_each_kind_of_bad_line_is_named_with_its_number(line: str, problem: str) -> None:
    message = refused(GOOD, line, GOOD)
    assert message.startswith(
        "queries file 'q.jsonl' has 1 bad line(s), nothing was run; each line is one JSON object like "
    )
    assert f"\n  {problem}" in message


def test_every_bad_line_is_reported_not_only_the_first() -> None:
    message = refused('{"query": 1, "relevant": ["1"]}', GOOD, "nope", GOOD, '{"query": "x", "relevant": []}')
    assert "has 3 bad line(s)" in message
    assert [line.split(":")[0] for line in message.splitlines()[1:]] == ["  line 1", "  line 3", "  line 5"]


def test_a_long_list_of_bad_lines_is_cut_and_counted() -> None:
    message = refused(*["{}"] * (MAX_REPORTED + 5))
    assert message.endswith("\n  ... and 5 more")
    assert message.count("missing key(s)") == MAX_REPORTED


def test_an_empty_file_or_an_unreadable_one_is_refused(tmp_path: Path) -> None:
    assert refused("", "  ").startswith("queries file 'q.jsonl' holds no query: add lines like {")
    with pytest.raises(ConfigError, match="queries file '.*missing.jsonl' cannot be read"):
        load_queries(tmp_path / "missing.jsonl")
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\xff\xfe{")
    with pytest.raises(ConfigError, match="cannot be read"):
        load_queries(binary)
