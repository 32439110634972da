"""Ids of pushed documents: the one given, else the metadata field the settings name, else a content hash,
so the same document pushed twice is one record. Run in-process with the test kit."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import producer
from producer import testing
from store import ConfigError, Filter, load_settings
from store.query import search

SETTINGS = {
    "vectors": {"dimensions": 32},
    "collections": {
        "uploads": {},
        "pages": {"source": {"kind": "push", "id_field": "url"}},
        "nested": {"source": {"kind": "push", "id_field": "origin.key"}},
    },
}


@pytest.fixture
def tasks() -> Iterator[testing.TaskQueue]:
    with testing.queue(SETTINGS) as queue:
        yield queue


def records(tasks: testing.TaskQueue, collection: str) -> list[str]:
    """The record ids a collection holds, each once."""
    return sorted({m.metadata["record_id"] for m in search(collection, "pricing plan", limit=100)})


def test_the_same_document_pushed_twice_is_one_record(tasks: testing.TaskQueue) -> None:
    first = producer.index_document("uploads", text="Pricing for the annual plan", metadata={"kind": "pdf"})
    again = producer.index_document("uploads", text="Pricing for the annual plan", metadata={"kind": "pdf"})
    other = producer.index_document("uploads", text="Pricing for the annual plan", metadata={"kind": "doc"})
    assert first == again != other and len(first) == 32
    assert first == tasks.producer.document_id("uploads", "Pricing for the annual plan", {"kind": "pdf"})
    tasks.run_queue()
    assert records(tasks, "uploads") == sorted([first, other])
    producer.delete_document("uploads", first)
    tasks.run_queue()
    assert records(tasks, "uploads") == [other]


def test_the_id_field_names_the_document_so_a_new_text_replaces_the_old(tasks: testing.TaskQueue) -> None:
    url = "https://example.com/pricing"
    assert producer.index_document("pages", text="Old pricing plan", metadata={"url": url}) == url
    assert producer.index_document("pages", None, "New pricing plan", {"url": url}) == url
    tasks.run_queue()
    assert records(tasks, "pages") == [url]
    assert tasks.store.get_collection("pages", create=True).count(Filter.eq("record_id", url)) == 1
    assert search("pages", "pricing plan")[0].text == "New pricing plan"
    assert producer.index_document("nested", text="A pricing plan", metadata={"origin": {"key": 7}}) == "7"
    assert producer.index_document("pages", "given", "Pricing", {"url": url}) == "given"  # an id given wins


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        (
            {},
            r"metadata has no 'url', which collections.pages.source.id_field names as its id .*add it to the "
            r"metadata, or pass id=",
        ),
        ({"url": ""}, r"metadata 'url' \(collections.pages.source.id_field\) is '', which is not an id"),
        ({"url": True}, r"is True, which is not an id .*: fix the metadata, or pass id="),
        ({"url": ["a"]}, r"is \['a'\], which is not an id"),
        ({"url": "x" * 600}, r"over limits.max_id_chars \(512\)"),
    ],
)
def test_a_bad_id_field_value_is_refused_naming_it_and_the_fix(
    tasks: testing.TaskQueue, metadata: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        producer.index_document("pages", text="Pricing", metadata=metadata)
    assert tasks.pending == []


def test_other_mistakes_are_refused_before_anything_is_sent(tasks: testing.TaskQueue) -> None:
    with pytest.raises(ConfigError, match="text of document 'new document' must be a string, got NoneType: pass text="):
        producer.index_document("uploads", metadata={"kind": "pdf"})  # type: ignore[call-overload]
    with pytest.raises(ConfigError, match="record id False is not allowed: use a non-empty string or an integer"):
        producer.index_document("uploads", False, "Pricing")  # type: ignore[arg-type]
    assert tasks.pending == []


def test_id_field_is_for_pushed_collections_only(tmp_path: Path) -> None:
    path = tmp_path / "vectorsync.toml"
    path.write_text(
        '[collections.notes.source]\nkind = "sql"\nurl = "sqlite://"\ntable = "notes"\ntext = "{body}"\n'
        'id_field = "url"\n'
    )
    with pytest.raises(
        ConfigError,
        match=r"source.id_field \('url'\) .* for kind = 'push'; a sql source's ids "
        r"come from source.id: remove id_field",
    ):
        load_settings(path)
    path.write_text('[collections.pages.source]\nid_field = "not a field"\n')
    with pytest.raises(ConfigError, match="collections.pages.source.id_field = 'not a field' is not allowed"):
        load_settings(path)
