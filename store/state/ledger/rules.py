"""The ledger's decisions as pure functions, so that the memory and the PostgreSQL ledger take each the same way
and each rule is tested alone (as ``worker/policy.py`` does for the worker's)."""

from __future__ import annotations

from store.contract import RunStatus

__all__ = ["status_when_counted"]


def status_when_counted(status: RunStatus, *, expected: int | None, counted: int, deferred: bool) -> RunStatus | None:
    """The status a run moves to once ``counted`` of its ``expected`` batches are counted: INDEXING when its
    vector index build was deferred (the bulk path builds it next), DONE otherwise. None while batches are
    still to come, the number of batches is not known yet, or the run is no longer running (a failed run
    stays failed; a run already INDEXING waits for ``complete_run``)."""
    if status != RunStatus.RUNNING or expected is None or counted < expected:
        return None
    return RunStatus.INDEXING if deferred else RunStatus.DONE
