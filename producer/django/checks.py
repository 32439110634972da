"""``manage.py check``: each watched model's collection reads that model's table, as the worker will.

The worker has no Django: it reads a record by id from the collection's SQL source. A collection that is
not declared, whose source is not ``sql``, or whose table, id or columns are not the model's would index
nothing, or other rows; each is an Error naming the model, the collection and the setting to write.
"""

from __future__ import annotations

import json
from typing import Any

from django.core import checks
from django.db import models

from producer.django.signals import watched
from store.errors import ConfigError
from store.settings import CollectionSettings, load_settings
from store.settings.templates import template_fields

__all__ = ["TAG", "check_indexed_models", "register", "source_toml"]

#: ``manage.py check --tag vectorsync`` runs these alone.
TAG = "vectorsync"


def register() -> None:
    """Add the check to Django's registry (once: Django keeps a set)."""
    checks.register(check_indexed_models, TAG)


def check_indexed_models(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """One Error per watched model whose collection would not read its rows."""
    try:
        settings = load_settings()
    except ConfigError as exc:
        return [
            checks.Error(
                f"vectorsync's settings cannot be read: {exc}",
                id="vectorsync.E001",
                hint="fix the file VECTORSYNC['CONFIG'] (or VECTORSYNC_CONFIG) names",
            )
        ]
    found: list[checks.CheckMessage] = []
    for model, collections in watched().items():
        for name in collections:
            problem = _problem(model, name, settings.collections.get(name))
            if problem is not None:
                message, code = problem
                found.append(
                    checks.Error(
                        f"{model._meta.label} is indexed into {name!r}, but {message}",
                        hint=f"declare it as\n{source_toml(model, name)}",
                        obj=model,
                        id=f"vectorsync.{code}",
                    )
                )
    return found


def _problem(model: type[models.Model], name: str, declared: CollectionSettings | None) -> tuple[str, str] | None:
    if declared is None:
        return "vectorsync's settings declare no such collection", "E002"
    source, meta = declared.source, model._meta
    if source.kind != "sql":
        return f"its source is {source.kind!r}: the worker reads the model's rows from its table", "E003"
    if (source.table or "").rsplit(".", 1)[-1] != meta.db_table:
        return f"its source table is {source.table!r}, not the model's {meta.db_table!r}", "E004"
    if source.id != meta.pk.column:
        return f"its source id is {source.id!r}, not the model's primary key column {meta.pk.column!r}", "E005"
    if not source.text:
        return "its source has no text template (source.text)", "E006"
    columns = {field.column for field in meta.concrete_fields}
    try:
        named = [*template_fields(source.text), *source.metadata, *filter(None, [source.updated_at])]
    except ConfigError as exc:
        return str(exc), "E006"
    missing = [column for column in dict.fromkeys(named) if column not in columns]
    if missing:
        return f"its source names columns {meta.db_table!r} does not have: {', '.join(missing)}", "E006"
    return None


def source_toml(model: type[models.Model], name: str) -> str:
    """The ``[collections.NAME.source]`` that reads ``model``'s table: its text columns as the text, and an
    ``auto_now`` column as ``updated_at`` (the URL is the database Django writes, which only you can spell)."""
    meta = model._meta
    texts = [f.column for f in meta.concrete_fields if isinstance(f, models.CharField | models.TextField)]
    text = "\n\n".join("{" + column + "}" for column in texts)
    stamps = [f.column for f in meta.concrete_fields if isinstance(f, models.DateTimeField) and f.auto_now]
    lines = [
        f"[collections.{name}.source]",
        'kind = "sql"',
        'url = "postgresql://USER@HOST/DATABASE"',
        f"table = {json.dumps(meta.db_table)}",
        f"id = {json.dumps(meta.pk.column)}",
        f"text = {json.dumps(text)}",
    ]
    if stamps:
        lines.append(f"updated_at = {json.dumps(stamps[0])}")
    return "\n".join(lines)
