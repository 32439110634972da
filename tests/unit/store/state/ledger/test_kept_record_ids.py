"""How a refused record id is told (issue 48, defect 1): quoted in its error by its beginning when long, so the rule
after it is kept; and kept in a PostgreSQL failures row escaped, and cut to a beginning and a digest when no btree
key could hold it (the rows themselves: tests/integration/worker/test_unstorable_ids.py)."""

from __future__ import annotations

import pytest

from store.errors import ConfigError
from store.state.ledger.rules import MAX_ERROR_CHARS, MAX_KEPT_ID_BYTES, kept_error, kept_record_id
from store.vectors.records import ID_RULE, check_record_id, quoted_id


def test_a_storable_id_is_kept_as_it_is_and_an_unstorable_one_escaped() -> None:
    assert kept_record_id("note 7") == "note 7"
    assert kept_record_id("🦀" * 512) == "🦀" * 512  # the longest id the default limits allow, whole
    assert kept_record_id("nul\x00id\ud800") == "nul\\x00id\\ud800"


def test_an_id_too_long_to_key_a_row_is_kept_as_its_beginning_length_and_digest() -> None:
    long_id, other = "x" * 5000, "x" * 4999 + "y"
    kept = kept_record_id(long_id)
    assert kept.startswith("x" * 40 + "... (5000 characters, sha256 ")
    assert len(kept.encode()) <= MAX_KEPT_ID_BYTES
    assert kept != kept_record_id(other)  # two long ids with the same beginning stay apart
    assert kept_record_id("\x00" * 1000).startswith("\\x00" * 40 + "... (1000 characters")


@pytest.mark.parametrize("record_id", ["nul\x00" * 300, "\ud800" * 600, "", "\x00"])
def test_a_refusal_quotes_the_id_and_keeps_the_rule_within_what_the_ledger_keeps(record_id: str) -> None:
    with pytest.raises(ConfigError) as refused:
        check_record_id(record_id)
    message = str(refused.value)
    assert quoted_id(record_id) in message and message.endswith(ID_RULE)
    assert kept_error(message) == message and len(message) < MAX_ERROR_CHARS
    assert repr(record_id[:40]) in message


def test_a_short_id_is_quoted_whole_and_a_long_one_by_its_beginning() -> None:
    assert quoted_id("sur\ud800") == "'sur\\ud800'"
    assert quoted_id("a" * 300) == f"{'a' * 40!r}... (300 characters)"
