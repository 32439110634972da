"""store/broker/refusals.py: what a producer refuses before anything is sent (issue 32, defect 1): ids no table can
hold or over ``limits.max_id_chars``, collections the settings do not declare, and reading a collection that has
no source."""

from __future__ import annotations

from typing import Any

import pytest

from store import ConfigError
from store.broker.producer import Producer
from store.settings import Settings

SETTINGS = Settings.model_validate(
    {
        "vectors": {"store": "memory", "dimensions": 8},
        "collections": {
            "notes": {
                "source": {"kind": "python", "loader": "tests.unit.worker.pipeline.test_hostile_input:load_records"}
            },
            "docs": {"source": {"kind": "push"}},
        },
    }
)
RULE = "a record id is a non-empty string of at most limits.max_id_chars characters, without NUL characters"


@pytest.fixture
def sent() -> list[Any]:
    return []


@pytest.fixture
def producer(sent: list[Any]) -> Producer:
    made = Producer(SETTINGS, send=lambda name, **options: sent.append((name, options)), ledger=_NoLedger())
    made.coalescer.client = None  # no Redis: nothing to coalesce with
    return made


class _NoLedger:
    def create_run(self, collection: str, **_: Any) -> str:
        return "run"


@pytest.mark.parametrize("bad", ["nul\x00id", "sur\ud800", "\udcff\udcfe"])  # the last: argv bytes \xff\xfe
def test_an_id_no_table_can_hold_is_refused_naming_it_and_the_rule(
    producer: Producer, sent: list[Any], bad: str
) -> None:
    for send in (
        lambda: producer.index_record("notes", bad),
        lambda: producer.index_batch("notes", ["1", bad]),
        lambda: producer.delete_document("docs", bad),
        lambda: producer.index_document("docs", bad, "x"),
    ):
        with pytest.raises(ConfigError, match=RULE) as refused:
            send()
        assert "\x00" not in str(refused.value) and "\ud800" not in str(refused.value)  # printable as it is
    assert sent == []


def test_an_id_over_max_id_chars_is_refused_by_index_as_by_index_document(producer: Producer, sent: list[Any]) -> None:
    with pytest.raises(ConfigError, match=r"has 5000 characters, over limits.max_id_chars \(512\)"):
        producer.index_record("notes", "n" * 5000)
    assert sent == []


def test_a_collection_the_settings_do_not_declare_is_refused(producer: Producer, sent: list[Any]) -> None:
    message = r"collection 'nosuch' is not declared in the settings \(declared: docs, notes\): check the name"
    with pytest.raises(ConfigError, match=message):
        producer.index_record("nosuch", 1)
    with pytest.raises(ConfigError, match=message):
        producer.reindex_all("nosuch")
    with pytest.raises(ConfigError, match=message):
        producer.reconcile("nosuch")
    assert sent == []


def test_a_pushed_collection_has_nothing_to_reindex(producer: Producer, sent: list[Any]) -> None:
    with pytest.raises(ConfigError, match=r"collection 'docs' has its records pushed .* nothing to index by id"):
        producer.reindex_all("docs")
    for by_id in (lambda: producer.index_record("docs", 1), lambda: producer.index_batch("docs", [1])):
        with pytest.raises(ConfigError, match=r"has its records pushed .* push the documents again"):
            by_id()  # found by the input fuzzer: `vectorsync index` of a pushed collection said "enqueued"
    assert sent == []
    assert producer.reindex_all("notes") == "run"
    assert [name for name, _ in sent] == ["vectorsync.reindex_all"]


def test_a_producer_whose_settings_declare_no_collection_sends_to_any() -> None:
    sent: list[Any] = []
    bare = Producer(
        Settings.model_validate({"vectors": {"store": "memory", "dimensions": 8}}),
        send=lambda name, **options: sent.append(name),
    )
    bare.coalescer.client = None
    assert bare.index_record("anything", 7)
    assert sent == ["vectorsync.index_record"]


def test_a_document_pushed_to_a_collection_the_settings_do_not_declare_is_refused(
    producer: Producer, sent: list[Any]
) -> None:
    message = r"collection 'nosuch' is not declared in the settings \(declared: docs, notes\)"
    with pytest.raises(ConfigError, match=message):
        producer.index_document("nosuch", "a", "text")
    with pytest.raises(ConfigError, match=message):
        producer.delete_document("nosuch", "a")
    assert sent == []


class _Runs(_NoLedger):
    def __init__(self) -> None:
        self.created: list[str] = []

    def create_run(self, collection: str, **_: Any) -> str:
        self.created.append(collection)
        return "run"

    def resume_run(self, run_id: str, **_: Any) -> list[Any]:
        raise AssertionError("a refused resume reaches no ledger")


@pytest.mark.parametrize(
    ("caps", "refusal"),
    [
        ({"max_cost": float("inf")}, r"--max-cost inf is not a cost: give a finite number of 0 or more"),
        ({"max_cost": float("nan")}, r"--max-cost nan is not a cost"),
        ({"max_cost": -1.0}, r"--max-cost -1.0 is not a cost"),
        ({"max_tokens": 99999999999999999999999}, r"--max-tokens 99999999999999999999999 is not a cap: .* to 9223"),
        ({"max_tokens": 0}, r"--max-tokens 0 is not a cap"),
    ],
)
def test_caps_no_ledger_or_json_can_hold_are_refused_before_a_run_is_created(
    sent: list[Any], caps: dict[str, Any], refusal: str
) -> None:
    """Issue 48, defects 5 and 6: ``--max-cost inf`` was taken (``status --json`` then held ``Infinity``), and a
    token cap past a bigint failed after its run was committed, leaving a run with no task."""
    runs = _Runs()
    producer = Producer(SETTINGS, send=lambda name, **options: sent.append((name, options)), ledger=runs)
    producer.coalescer.client = None
    with pytest.raises(ConfigError, match=refusal):
        producer.reindex_all("notes", **caps)
    with pytest.raises(ConfigError, match=refusal):
        producer.resume("run", **caps)
    assert (runs.created, sent) == ([], [])
