"""The base of every settings section: unknown keys refused, frozen, and a repr that hides credentials; and what a
class built from a section takes of it."""

from __future__ import annotations

from dataclasses import fields
from typing import Any, Self

from pydantic import BaseModel, ConfigDict

from store.settings.urls import without_credentials

__all__ = ["FromSection", "Section", "redacted_repr_args", "values_for"]


def redacted_repr_args(model: BaseModel) -> Any:
    """Pydantic's repr arguments with every URL's credentials hidden: a settings object may be logged."""
    for name, value in model.__repr_args__():
        yield name, (without_credentials(value) if isinstance(value, str) and "://" in value else value)


def values_for(target: type[Any], section: BaseModel) -> dict[str, Any]:
    """``section``'s values of the fields of dataclass ``target`` it has, by name: what a class built from a section
    (a store's tuning, a chain's policy, a provider's limits) takes from it."""
    return {f.name: getattr(section, f.name) for f in fields(target) if f.name in type(section).model_fields}


class FromSection:
    """Base of a dataclass built from a settings section: ``from_settings`` takes the values of the fields both have."""

    __slots__ = ()

    @classmethod
    def from_settings(cls, section: BaseModel) -> Self:
        """An instance with ``section``'s values of the fields it shares with it, the defaults for the rest."""
        return cls(**values_for(cls, section))


class Section(BaseModel):
    # No inf or nan: `cache_ttl_days = inf` loaded, then failed a search with OverflowError.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    def __repr__(self) -> str:
        args = ", ".join(f"{name}={value!r}" for name, value in redacted_repr_args(self))
        return f"{type(self).__name__}({args})"
