"""What becomes of a batch after one attempt: retry what retrying can fix, give up after max_retries, count once."""

from __future__ import annotations

from worker.pipeline.batch import BatchResult, as_failed
from worker.tasks.policy import RetryPolicy, decide

POLICY = RetryPolicy(max_retries=3, retry_delay=10)


def test_the_delay_doubles_and_honours_retry_after() -> None:
    assert [POLICY.countdown(n) for n in range(4)] == [10, 20, 40, 80]
    assert POLICY.countdown(0, at_least=45.5) == 45.5
    assert POLICY.may_retry(2) and not POLICY.may_retry(3)


def test_a_clean_batch_is_finished_with_its_counts() -> None:
    result = BatchResult(indexed=["a", "b"], skipped=["c"], deleted=["d"])
    decision = decide(result, retries=0, policy=POLICY)
    assert decision.retry == [] and decision.failures == {}
    assert decision.counts == {"done": 3, "skipped": 1, "failed": 0}


def test_records_that_retrying_can_fix_are_retried_alone_and_the_rest_carried() -> None:
    result = BatchResult(
        indexed=["a"], failed={"bad": "InputError: 400"}, retry={"z": "TransientError: 503", "y": "x"}, retry_after=90.0
    )
    decision = decide(result, retries=1, policy=POLICY, carried={"done": 5, "skipped": 2, "failed": 1})
    assert decision.retry == ["y", "z"]
    assert decision.countdown == 90.0  # Retry-After beats the 20 s backoff
    assert decision.failures == {"bad": "InputError: 400"}  # recorded now: no retry can fix it
    assert decision.counts == {"done": 6, "skipped": 2, "failed": 2}


def test_after_max_retries_they_are_given_up_as_failures_and_counted() -> None:
    result = BatchResult(indexed=["a"], retry={"z": "TransientError: 503"})
    decision = decide(result, retries=3, policy=POLICY, carried={"done": 1, "skipped": 0, "failed": 0})
    assert decision.retry == []
    assert decision.failures == {"z": "gave up after 3 retries: TransientError: 503"}
    assert decision.counts == {"done": 2, "skipped": 0, "failed": 1}


def test_a_batch_that_failed_whole_counts_each_record_failed() -> None:
    crashed = as_failed(["1"], KeyError("text"))
    assert decide(crashed, retries=0, policy=POLICY).counts == {"done": 0, "skipped": 0, "failed": 1}


def test_records_counted_elsewhere_move_from_done_to_failed_when_they_fail_and_count_nothing_else() -> None:
    """The pool batch's records were counted as done by the batches that left them in the pool."""
    result = BatchResult(indexed=["a"], skipped=["b"], failed={"bad": "InputError: 400"}, retry={"z": "503"})
    retrying = decide(
        result, retries=0, policy=POLICY, carried={"done": 0, "skipped": 0, "failed": 0}, counted_elsewhere=True
    )
    assert retrying.retry == ["z"] and retrying.counts == {"done": -1, "skipped": 0, "failed": 1}
    given_up = decide(
        BatchResult(retry={"z": "503"}), retries=3, policy=POLICY, carried=retrying.counts, counted_elsewhere=True
    )
    assert given_up.counts == {"done": -2, "skipped": 0, "failed": 2}  # processed unchanged: 0


def test_a_pooled_batch_counts_its_own_records_and_what_it_left_in_the_pool_but_not_what_it_claimed() -> None:
    result = BatchResult(
        indexed=["a", "c1"],
        deferred=["b", "c2"],
        skipped=["c3"],
        failed={"c4": "InputError"},
        retry={"c5": "503", "d": "503"},
        claimed=["c1", "c2", "c3", "c4", "c5"],
    )
    own, theirs = result.owned()
    assert (own.indexed, own.deferred, own.skipped, own.failed, own.retry) == (["a"], ["b"], [], {}, {"d": "503"})
    assert (theirs.indexed, theirs.deferred, theirs.skipped) == (["c1"], ["c2"], ["c3"])
    assert [*theirs.failed, *theirs.retry] == ["c4", "c5"]  # back to the pool, for the pool batch
    assert decide(own, retries=3, policy=POLICY).counts == {"done": 2, "skipped": 0, "failed": 1}


def test_without_a_limit_an_outage_is_waited_out_at_most_five_minutes_a_try() -> None:
    """A pushed document gave up after worker.max_retries and was lost with its only copy of the content (its
    task): the 30-minute chaos run's overlapping provider outages outlasted 7 retries."""
    patient = POLICY.without_limit()
    decision = decide(BatchResult(retry={"doc-1": "TransientError: 503"}), retries=40, policy=patient)
    assert decision.retry == ["doc-1"] and decision.failures == {}
    assert decision.countdown == 300.0
    assert patient.may_retry(10**6) and POLICY.countdown(30) == 300.0
