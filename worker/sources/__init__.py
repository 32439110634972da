"""Sources of records: a SQL table, a Python loader, or documents pushed with their content."""

from __future__ import annotations

from store.errors import ConfigError
from store.settings import NetworkSettings, SourceSettings
from worker.sources.base import Source, SourceRecord
from worker.sources.push import PushSource

__all__ = ["PushSource", "Source", "SourceRecord", "source_from_settings"]


def source_from_settings(
    collection: str, settings: SourceSettings, *, network: NetworkSettings | None = None
) -> Source:
    """The source ``[collections.NAME.source]`` describes; a SQL source's connections notice a silent database
    as ``network`` says (None: the defaults). Raises ConfigError for an incomplete one."""
    if settings.kind == "push":
        return PushSource(collection)
    if settings.kind == "python":
        if not settings.loader:
            raise ConfigError(f"collections.{collection}.source.loader is required for kind = 'python'")
        from worker.sources.python import PythonSource

        return PythonSource(loader=settings.loader)
    missing = [key for key in ("url", "table", "text") if not getattr(settings, key)]
    if missing:
        raise ConfigError(f"collections.{collection}.source needs {', '.join(missing)} for kind = 'sql'")
    from worker.sources.sql import SqlSource

    return SqlSource(settings, network=network)
