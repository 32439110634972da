"""The ``VECTORSYNC`` setting of a Django project: the vectorsync settings file, and the models indexed.

    VECTORSYNC = {"CONFIG": "vectorsync.toml", "MODELS": {"notes.Note": "notes", "crm.Call": ["calls", "all"]}}

Both keys are optional; any other key is refused, naming the ones there are.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

__all__ = ["CONFIG_ENV", "KEYS", "apply_config", "declared_models", "setting"]

#: What names the settings file for every vectorsync part: the CLI's ``--config`` sets it too.
CONFIG_ENV = "VECTORSYNC_CONFIG"
#: The keys ``VECTORSYNC`` may hold.
KEYS = ("CONFIG", "MODELS")


def setting() -> Mapping[str, Any]:
    """``settings.VECTORSYNC`` (empty when unset), its keys checked."""
    value = getattr(settings, "VECTORSYNC", {})
    if not isinstance(value, Mapping):
        raise ImproperlyConfigured(f"VECTORSYNC is a dict such as {{'CONFIG': 'vectorsync.toml'}}, got {value!r}")
    unknown = sorted(set(value) - set(KEYS))
    if unknown:
        raise ImproperlyConfigured(f"VECTORSYNC has unknown keys {unknown}: it takes {', '.join(KEYS)}")
    return value


def apply_config() -> str | None:
    """Make ``VECTORSYNC["CONFIG"]`` the settings file this process reads (``load_settings``), unless
    VECTORSYNC_CONFIG names one already: the environment overrides a project's file, as it overrides each
    setting. Returns the file in force."""
    config = setting().get("CONFIG")
    if config is not None and CONFIG_ENV not in os.environ:
        os.environ[CONFIG_ENV] = os.fspath(config)
    return os.environ.get(CONFIG_ENV)


def declared_models() -> dict[str, tuple[str, ...]]:
    """``VECTORSYNC["MODELS"]``: each model label and its collections."""
    models = setting().get("MODELS", {})
    if not isinstance(models, Mapping):
        raise ImproperlyConfigured(
            f"VECTORSYNC['MODELS'] maps model labels to collections, such as {{'notes.Note': 'notes'}}, got {models!r}"
        )
    return {label: (names,) if isinstance(names, str) else tuple(names) for label, names in models.items()}
