"""A labelled queries file: JSON Lines of ``{"query": str, "relevant": [record ids], "filter": {...}}``.

The whole file is checked before any query runs: every malformed line is reported with its number and
what is wrong, in one ConfigError, so a long evaluation never stops half way on line 900.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from store.errors import ConfigError
from store.settings.jsontext import loads
from store.vectors.filters import Filter

__all__ = ["MAX_REPORTED", "EvalQuery", "load_queries", "parse_queries"]

#: Bad lines named in one error; the rest are counted.
MAX_REPORTED = 20
#: Bytes a queries file may hold.
MAX_FILE_BYTES = 64 * 2**20
_REQUIRED = ("query", "relevant")
_KEYS = frozenset({"query", "relevant", "filter"})
_EXAMPLE = '{"query": "how are refunds paid?", "relevant": ["42"], "filter": {"tenant": "acme"}}'


@dataclass(frozen=True)
class EvalQuery:
    """One labelled query: its text, the ids of the records that answer it, and an optional filter."""

    query: str
    relevant: tuple[str, ...]
    filter: Mapping[str, Any] | None = field(default=None)
    #: Line of the queries file it came from (0 when built in code).
    line: int = 0

    def search_filter(self) -> Filter | None:
        """The filter as a ``Filter`` (checked when the file was read)."""
        return None if self.filter is None else Filter.from_dict(self.filter)


def load_queries(path: str | Path) -> list[EvalQuery]:
    """Read and check a queries file of at most ``MAX_FILE_BYTES``. Raises ConfigError naming each bad line, or
    a file that cannot be read."""
    where = Path(path)
    try:
        with where.open("rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)  # a bound, not the size: /dev/zero has none
        if len(raw) > MAX_FILE_BYTES:
            raise ConfigError(
                f"queries file {str(where)!r} is over {MAX_FILE_BYTES // 2**20} MiB: split it, or "
                "keep the queries a person judged (an eval needs hundreds, not millions)"
            )
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"queries file {str(where)!r} cannot be read: {exc}") from exc
    return parse_queries(text.splitlines(), source=str(where))


def parse_queries(lines: Iterable[str], *, source: str = "queries") -> list[EvalQuery]:
    """Check every line, then return the queries; blank lines are skipped. Raises ConfigError."""
    queries: list[EvalQuery] = []
    problems: list[str] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            queries.append(_parse_line(line, number))
        except ConfigError as exc:
            problems.append(f"line {number}: {exc}")
    if problems:
        shown = problems[:MAX_REPORTED]
        more = len(problems) - len(shown)
        tail = f"\n  ... and {more} more" if more else ""
        raise ConfigError(
            f"queries file {source!r} has {len(problems)} bad line(s), nothing was run; each line "
            f"is one JSON object like {_EXAMPLE}:\n  " + "\n  ".join(shown) + tail
        )
    if not queries:
        raise ConfigError(f"queries file {source!r} holds no query: add lines like {_EXAMPLE}")
    return queries


def _parse_line(line: str, number: int) -> EvalQuery:
    data = loads(line)
    if not isinstance(data, dict):
        raise ConfigError(f"a JSON object is expected, got {type(data).__name__}")
    missing = [key for key in _REQUIRED if key not in data]
    if missing:
        raise ConfigError(f"missing key(s) {', '.join(map(repr, missing))}")
    extra = sorted(set(data) - _KEYS)
    if extra:
        raise ConfigError(f"unknown key(s) {', '.join(map(repr, extra))}: use only query, relevant and filter")
    return EvalQuery(_query(data["query"]), _relevant(data["relevant"]), _filter(data.get("filter")), number)


def _query(value: object) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"'query' must be a string, got {_shown(value)}")
    if not value.strip():
        raise ConfigError("'query' is empty: write the text a user would search for")
    return value


def _relevant(value: object) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise ConfigError(f"'relevant' must be a list of record ids, got {_shown(value)}")
    if not value:
        raise ConfigError("'relevant' is empty: name at least one record id that answers the query")
    wrong = [item for item in value if not isinstance(item, str) or not item]
    if wrong:
        raise ConfigError(f"'relevant' must hold non-empty strings (record ids, quoted), got {_shown(wrong[0])}")
    repeated = sorted({item for item in value if value.count(item) > 1})
    if repeated:
        raise ConfigError(f"'relevant' names {', '.join(map(repr, repeated))} more than once")
    return tuple(value)


def _filter(value: object) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ConfigError(f'\'filter\' must be a JSON object like {{"kind": "call"}}, got {_shown(value)}')
    try:
        Filter.from_dict(value)
    except ConfigError as exc:
        raise ConfigError(f"bad 'filter': {exc}") from None
    return value


def _shown(value: object) -> str:
    return f"{type(value).__name__} {json.dumps(value)[:60]}"
