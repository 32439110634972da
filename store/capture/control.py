"""What ``vectorsync capture``, ``init``, ``doctor``, ``status`` and the metrics do with capture: install it,
remove it, print its DDL, and report each collection's state (installed, pending rows, lag)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import store.capture.sql as sql
from store.capture.outbox import Installation, Outbox
from store.capture.sql import Target
from store.capture.target import captured, sql_sources
from store.errors import ConfigError, StoreError
from store.settings import Settings

__all__ = ["CaptureState", "disable", "enable", "report", "statements"]


@contextmanager
def _opened(settings: Settings, name: str) -> Iterator[tuple[Outbox, Target]]:
    source = sql_sources(settings).get(name)
    if source is None:
        known = ", ".join(sorted(sql_sources(settings))) or "none"
        raise ConfigError(
            f"collection {name!r} is not a declared SQL collection on PostgreSQL, so nothing can "
            f"capture its changes (SQL collections on PostgreSQL: {known})"
        )
    assert source.url is not None
    outbox = Outbox(source.url)
    try:
        yield outbox, outbox.target(name, source)
    finally:
        outbox.close()


def enable(settings: Settings, name: str) -> Target:
    """Install ``name``'s capture (idempotent). Raises ConfigError (with what to run when the role may not).

    Where the capture is in place as it would install it (installed before, or a DBA ran what ``capture sql``
    prints), there is nothing to do: ``init`` on every deploy neither fails there nor takes the table's lock.
    """
    with _opened(settings, name) as (outbox, target):
        if outbox.current(target):
            return target
        try:
            outbox.enable(target)
        except ConfigError:
            if not outbox.current(target):
                raise
        return target


def disable(settings: Settings, name: str) -> Target:
    """Remove ``name``'s triggers and function; its pending rows stay until the relay drains them."""
    with _opened(settings, name) as (outbox, target):
        outbox.disable(target)
        return target


def statements(settings: Settings, name: str, *, remove: bool = False) -> list[str]:
    """The DDL ``enable`` (or ``disable``) runs, for a DBA to run where vectorsync's role may not."""
    with _opened(settings, name) as (_outbox, target):
        return sql.remove_ddl(target) if remove else sql.install_ddl(target)


@dataclass(frozen=True, slots=True)
class CaptureState:
    """One collection's capture as the source database holds it.

    ``installation`` is None where it was not asked (capture off) or could not be read; ``declared`` False
    marks outbox rows of a collection the settings no longer declare: kept, never deleted by vectorsync.
    """

    collection: str
    wanted: bool
    declared: bool = True
    installation: Installation | None = None
    pending: int = 0
    lag_seconds: float | None = None
    error: str | None = None

    @property
    def problem(self) -> str | None:
        """What is wrong, with the fix; None when nothing is."""
        if self.error:
            return self.error
        if not self.declared:
            return (
                f"{self.pending} outbox rows of collection {self.collection!r}, which the settings do not "
                f"declare on this source: declare it again and the relay drains them, or delete them yourself "
                f"(DELETE FROM {sql.OUTBOX} WHERE collection = '{self.collection}')"
            )
        if self.wanted and (self.installation is None or not self.installation.complete):
            return f"capture of {self.collection} is not installed: run `vectorsync capture enable {self.collection}`"
        return None


def report(settings: Settings) -> list[CaptureState]:
    """The capture state of every collection that asks for capture or has rows waiting, and of orphan rows,
    per source database. A database that cannot be read gives its collections an ``error``."""
    wanted = set(captured(settings))
    by_url: dict[str, list[str]] = {}
    for name, source in sql_sources(settings).items():
        assert source.url is not None
        by_url.setdefault(source.url, []).append(name)
    states: list[CaptureState] = []
    for url, names in by_url.items():
        if not wanted & set(names):
            continue  # nobody asked for capture here: do not connect to look
        outbox = Outbox(url)
        try:
            pending = {p.collection: p for p in outbox.pending()}
            for name in sorted(names):
                waiting = pending.pop(name, None)
                if name not in wanted and waiting is None:
                    continue
                installation = outbox.installed(outbox.target(name, settings.collections[name].source))
                states.append(
                    CaptureState(
                        name,
                        name in wanted,
                        installation=installation,
                        pending=waiting.rows if waiting else 0,
                        lag_seconds=waiting.lag_seconds if waiting else None,
                    )
                )
            states += [
                CaptureState(p.collection, False, declared=False, pending=p.rows, lag_seconds=p.lag_seconds)
                for p in pending.values()
            ]
        except (StoreError, ConfigError) as exc:
            states += [CaptureState(name, name in wanted, error=str(exc)) for name in sorted(names) if name in wanted]
        finally:
            outbox.close()
    return states
