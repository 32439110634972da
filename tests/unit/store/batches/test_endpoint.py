"""A job's state as the lane reads it: finished or not, and refused for a full queue (only that refusal)."""

from __future__ import annotations

import pytest

from store.batches.endpoint import FINISHED, Job


@pytest.mark.parametrize("status", ["validating", "in_progress", "finalizing", "cancelling"])
def test_a_job_on_its_way_is_not_finished(status: str) -> None:
    assert not Job("b", status).finished


@pytest.mark.parametrize("status", sorted(FINISHED))
def test_a_job_in_an_end_state_is_finished(status: str) -> None:
    assert Job("b", status).finished


def test_only_a_failed_job_refused_for_queued_tokens_waits_for_the_queue() -> None:
    assert Job("b", "failed", errors=("token_limit_exceeded: Enqueued token limit reached",)).queue_full
    assert not Job("b", "failed", errors=("invalid_request: bad line",)).queue_full
    assert not Job("b", "completed", errors=("token_limit_exceeded: x",)).queue_full
