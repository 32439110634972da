"""What a relay sends of a claim: each id once per collection, in first change order, with its oldest change's
time; a truncate reindexes its collection (the relay at work: tests/integration/store/capture/test_relay.py)."""

from __future__ import annotations

from store.capture import Change
from store.capture.relay import plan


def change(
    seq: int, collection: str, record_id: str | None, truncated: bool = False, at: float | None = None
) -> Change:
    return Change(seq, collection, record_id, truncated, at)


def test_each_id_is_sent_with_its_oldest_changes_time_an_unknown_time_with_none() -> None:
    work = plan(
        [change(1, "a", "3", at=20.0), change(2, "a", "1"), change(3, "a", "3", at=10.0), change(4, "b", "1", at=5.0)]
    )
    assert work.ids == {"a": ["3", "1"], "b": ["1"]}
    assert work.changed_at == {"a": {"3": 10.0}, "b": {"1": 5.0}}


def test_a_claim_is_coalesced_per_collection_in_first_change_order() -> None:
    work = plan([change(1, "a", "3"), change(2, "b", "1"), change(3, "a", "1"), change(4, "a", "3")])
    assert work.ids == {"a": ["3", "1"], "b": ["1"]} and work.truncated == set()


def test_a_truncate_reindexes_its_collection_and_its_ids_are_sent_too() -> None:
    # The full reindex trusts updated_at stamps: a row put back after the TRUNCATE (a reload) with its own
    # stamp and new contents would not be read by it, so the claim's ids go as well.
    work = plan([change(1, "a", "3"), change(2, "a", None, True), change(3, "a", "9"), change(4, "b", "1")])
    assert work.truncated == {"a"} and work.ids == {"a": ["3", "9"], "b": ["1"]}
