"""What of the settings nobody chose: the keys no settings file or ``VECTORSYNC_*`` variable set (doctor marks a
part that answers on them ``default``, not ``ok``: a part that answers on a default is not one anyone configured)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from store.settings import Settings

__all__ = ["all_unset", "unset"]


def unset(settings: Settings, *keys: str) -> tuple[str, ...]:
    """The settings of ``keys`` (``section.key``, or a top-level ``models``) that no settings file or
    ``VECTORSYNC_*`` variable set: pydantic-settings' ``model_fields_set`` tells, section by section."""
    left = []
    for key in keys:
        section, _, name = key.partition(".")
        if section not in settings.model_fields_set or (
            name and name not in getattr(settings, section).model_fields_set
        ):
            left.append(key)
    return tuple(left)


def all_unset(settings: Settings, *keys: str) -> tuple[str, ...]:
    """``keys`` when none of them is set, else nothing: a part placed by any one of them was configured."""
    left = unset(settings, *keys)
    return left if len(left) == len(keys) else ()
