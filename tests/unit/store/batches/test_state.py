"""What the lane holds of a text, and whether a submission is still open."""

from __future__ import annotations

from store.batches.state import CLAIMED, Held, Submission


def test_a_text_is_answered_by_a_vector_or_an_error() -> None:
    assert Held([1.0]).answered and Held(error="500: boom").answered and not Held().answered


def test_a_submission_is_open_until_its_job_ends() -> None:
    claimed = Submission("r-1", "r", "m", None, CLAIMED, 3)
    assert claimed.open
    assert Submission("r-1", "r", "m", "batch_1", "in_progress", 3).open
    assert not Submission("r-1", "r", "m", "batch_1", "expired", 3).open
