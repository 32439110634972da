"""``[collections.NAME.source]``: where a collection's records come from, and how changes to them are caught."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from store.settings.section import Section

__all__ = ["FIELD_PATTERN", "SourceSettings"]

#: A metadata field name: letters, digits and '_', dotted for nested objects (filters check the same).
FIELD_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$"


class SourceSettings(Section):
    kind: Literal["sql", "python", "push"] = "push"
    url: str | None = None
    table: str | None = None
    id: str = "id"
    text: str | None = None
    metadata: list[str] = Field(default_factory=list)
    updated_at: str | None = None
    where: str | None = None
    loader: str | None = None
    #: Pushed documents (kind = "push"): the metadata field (dotted for nested objects) that holds a document's
    #: id when ``index_document`` is given none; None: a hash of the text and metadata.
    id_field: str | None = Field(default=None, pattern=FIELD_PATTERN, max_length=200)
    #: SQL sources on PostgreSQL: "trigger" installs triggers that write every change, whoever makes it, to an
    #: outbox in the source database in the same transaction (``vectorsync capture``); "off": enqueues and
    #: reconcile sweeps only.
    capture: Literal["off", "trigger"] = "off"
    #: With capture: the trigger also wakes the relay with a payload-free NOTIFY. Off by default: NOTIFY takes
    #: a lock at commit that serialises committing writers (8 concurrent single-row writers ran at 0.23x of
    #: their rate without capture with it, 0.86x without, ``python -m bench --only capture``), and polling
    #: every 0.5 s already makes a change searchable within about a second.
    capture_notify: bool = False

    @model_validator(mode="after")
    def _id_field_is_for_pushed_documents(self) -> SourceSettings:
        if self.id_field is not None and self.kind != "push":
            raise ValueError(
                f"source.id_field ({self.id_field!r}) names the metadata field that holds a pushed "
                f"document's id, so it is for kind = 'push'; a {self.kind} source's ids come from "
                f"{'source.id' if self.kind == 'sql' else 'its loader'}: remove id_field"
            )
        return self

    @model_validator(mode="after")
    def _capture_needs_postgresql(self) -> SourceSettings:
        if self.capture == "off":
            return self
        scheme = (self.url or "").split("://", 1)[0].split("+", 1)[0]
        if self.kind != "sql" or scheme not in ("postgres", "postgresql"):
            where = f"a {self.kind} source" if self.kind != "sql" else f"a {scheme or 'URL-less'} database"
            raise ValueError(
                f"source.capture = 'trigger' needs a SQL source on PostgreSQL, not {where}: set "
                "capture = 'off' and source.updated_at to a column every write changes, so reconcile "
                "sweeps find the changes (worker.reconcile_seconds)"
            )
        return self
