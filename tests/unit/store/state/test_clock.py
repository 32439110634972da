"""The state's clock: aware, in UTC, now."""

from __future__ import annotations

from datetime import UTC, datetime

from store.state.clock import now


def test_now_is_this_moment_in_utc() -> None:
    before = datetime.now(UTC)
    found = now()
    assert found.tzinfo is UTC and before <= found <= datetime.now(UTC)
