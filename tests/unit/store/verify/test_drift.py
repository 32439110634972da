"""``compare``, the pure rule: each kind of drift alone, on values."""

from __future__ import annotations

from store.state.ledger import LedgerEntry
from store.vectors.records import ChunkDigest, text_digest
from store.verify import Expected, Kind, Report, compare

ENTRY = LedgerEntry("7", "h1", "m", 2)


def chunks(*texts: str, record_id: str = "7", model: str = "m", dimensions: int | None = 4) -> list[ChunkDigest]:
    return [
        ChunkDigest(f"{record_id}:{i}", record_id, i, text_digest(t), model, dimensions) for i, t in enumerate(texts)
    ]


def kinds(*args: object, **options: object) -> tuple[Kind, ...]:
    found = compare(*args, dimensions=4, **options)  # type: ignore[arg-type]
    return found.kinds if found is not None else ()


def test_chunks_as_the_ledger_says_are_no_drift() -> None:
    assert compare("7", ENTRY, chunks("a", "b"), dimensions=4) is None
    assert compare("7", LedgerEntry("7", "h1", "m", 0), [], dimensions=4) is None  # a blank record: no chunks


def test_each_kind_alone() -> None:
    assert kinds("7", ENTRY, []) == (Kind.MISSING,)
    assert kinds("7", ENTRY, chunks("a")) == (Kind.COUNT,)
    assert kinds("7", ENTRY, chunks("a", "b", "c")) == (Kind.COUNT,)
    assert kinds("7", ENTRY, chunks("a", "b", dimensions=5)) == (Kind.VECTOR,)
    assert kinds("7", ENTRY, chunks("a", "b", model="other")) == (Kind.MODEL,)
    assert kinds("7", None, chunks("a")) == (Kind.ORPHAN,)
    assert kinds("7", LedgerEntry("7", "", "", 0, 3), chunks("a")) == (Kind.ORPHAN,)  # a push's delete
    assert kinds("7", None, []) == ()


def test_texts_are_compared_only_while_the_source_holds_the_ledgers_content() -> None:
    made = Expected(True, "h1", (text_digest("a"), text_digest("b")))
    assert kinds("7", ENTRY, chunks("a", "b"), expected=made) == ()
    assert kinds("7", ENTRY, chunks("a", "x"), expected=made) == (Kind.TEXT,)
    changed = Expected(True, "h2", (text_digest("a"), text_digest("b")))
    assert kinds("7", ENTRY, chunks("a", "x"), expected=changed) == ()  # stale: its own task rewrites it
    assert kinds("7", ENTRY, chunks("a", "x"), expected=Expected(False)) == ()


def test_the_details_name_the_chunks_that_differ() -> None:
    found = compare("7", LedgerEntry("7", "h1", "m", 3), chunks("a", "b", "c", "d")[1:], dimensions=4)
    assert found is not None
    assert found.details == ("the ledger records 3 chunks, the store holds 3; missing 7:0; not the ledger's 7:3",)
    multi = compare("7", LedgerEntry("7", "h1", "m,n", 1), chunks("a", model="n"), dimensions=4)
    assert multi is None  # a record a fallback model embedded in part records both


def test_a_report_is_clean_until_anything_drifted() -> None:
    report = Report("notes", "notes", "memory")
    assert report.clean
    for name in ("drifted", "orphan_records", "keyword_terms"):
        setattr(report, name, 1)
        assert not report.clean
        setattr(report, name, 0)
    report.stale = 3
    assert report.clean
