"""What a batch is made of (``worker.pipeline.batch``): its result, merged and split by whose records they are;
ids that cannot be stored failing alone; the failures text; the content hash; a batch failed or retried whole."""

from __future__ import annotations

import pytest

from store.errors import ConfigError, StoreUnavailable
from worker.pipeline.batch import BatchResult, as_failed, as_retry, content_hash, failure, storable
from worker.pipeline.chunker import Chunker
from worker.sources.base import SourceRecord


def test_parts_of_a_batch_add_up_to_one_result() -> None:
    total = BatchResult(indexed=["a"], failed={"x": "E: x"}, retry_after=2.0, chunks=3)
    total.add(BatchResult(indexed=["b"], deferred=["c"], retry={"y": "E: y"}, retry_after=5.0, chunks=4))
    assert (total.indexed, total.deferred, total.chunks, total.retry_after) == (["a", "b"], ["c"], 7, 5.0)
    assert total.failed == {"x": "E: x"} and total.retry == {"y": "E: y"}
    assert total.done == 3  # written, deleted, superseded or left to a later batch: not the failed nor retried


def test_a_result_splits_into_the_batchs_own_records_and_those_it_claimed() -> None:
    result = BatchResult(indexed=["a", "p"], skipped=["b"], failed={"q": "E: q"}, claimed=["p", "q"], chunks=9)
    own, theirs = result.owned()
    assert (own.indexed, own.skipped, own.failed, own.chunks) == (["a"], ["b"], {}, 9)
    assert (theirs.indexed, theirs.failed) == (["p"], {"q": "E: q"})
    unclaimed = BatchResult(indexed=["a"])
    assert unclaimed.owned()[0] is unclaimed


def test_an_id_that_cannot_be_stored_fails_alone_before_any_query_sees_it() -> None:
    result = BatchResult()
    assert storable(["ok", "nul\x00id", "", "x" * 9], result, max_chars=8) == ["ok"]
    assert sorted(result.failed) == ["", "nul\x00id", "x" * 9]
    assert all(error.startswith("ConfigError: ") for error in result.failed.values())


def test_a_failure_names_its_fix_unless_the_error_does() -> None:
    assert failure("a", ValueError("bad value"), fix="fix the row") == "ValueError: bad value (fix the row)"
    assert failure("a", ConfigError("use a shorter id"), fix="fix the row") == "ConfigError: use a shorter id"


@pytest.mark.parametrize(
    "changed",
    [
        {"record": SourceRecord("a", "other text", {"k": 1})},
        {"record": SourceRecord("a", "some text", {"k": 2})},
        {"chunker": Chunker.markdown(max_tokens=8, overlap=2)},
        {"model": "another-model"},
        {"dimensions": 16},
    ],
    ids=["text", "metadata", "chunker", "model", "dimensions"],
)
def test_the_content_hash_changes_with_everything_that_shapes_a_records_chunks(changed: dict[str, object]) -> None:
    shape: dict[str, object] = {
        "record": SourceRecord("a", "some text", {"k": 1}),
        "chunker": Chunker(max_tokens=8, overlap=2),
        "model": "a-model",
        "dimensions": 8,
    }

    def digest(**parts: object) -> str:
        record = parts.pop("record")
        return content_hash(record, **parts)  # type: ignore[arg-type]

    assert digest(**shape) == digest(**shape)
    assert digest(**shape | changed) != digest(**shape)
    assert digest(**shape | {"record": SourceRecord("b", "some text", {"k": 1}, stamp="t9")}) == digest(**shape)


def test_whole_batch_outcomes_name_the_error() -> None:
    unavailable = as_retry(["1", "2"], StoreUnavailable("PostgreSQL is down"))
    assert unavailable.retry == dict.fromkeys(["1", "2"], "StoreUnavailable: PostgreSQL is down")
    crashed = as_failed(["1"], KeyError("text"))
    assert crashed.failed == {"1": "KeyError: 'text'"} and crashed.done == 0
