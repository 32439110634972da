"""The base of every settings section: unknown keys refused, frozen, and a repr that hides credentials."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from store.settings.urls import without_credentials

__all__ = ["Section", "redacted_repr_args"]


def redacted_repr_args(model: BaseModel) -> Any:
    """Pydantic's repr arguments with every URL's credentials hidden: a settings object may be logged."""
    for name, value in model.__repr_args__():
        yield name, (without_credentials(value) if isinstance(value, str) and "://" in value else value)


class Section(BaseModel):
    # No inf or nan: `cache_ttl_days = inf` loaded, then failed a search with OverflowError.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    def __repr__(self) -> str:
        args = ", ".join(f"{name}={value!r}" for name, value in redacted_repr_args(self))
        return f"{type(self).__name__}({args})"
