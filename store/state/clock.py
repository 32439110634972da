"""The state's clock: when the ledger and the generations registry say a thing happened, an aware datetime in
UTC (the columns are ``timestamp with time zone``)."""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["now"]


def now() -> datetime:
    """This moment, in UTC."""
    return datetime.now(UTC)
