"""vectorsync.toml files for integration tests: a SQL collection over a ``tests.crm.CrmTable`` with the fake OpenAI
server and pgvector, the [broker], [worker] and [vectors] sections every test shares, and a pushed collection."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

__all__ = ["SHORT_LIMITS", "pushed_collection", "settings_toml", "sql_collection", "worker_sections"]


def settings_toml(
    *,
    broker: str,
    cache: str,
    database: str,
    openai_url: str,
    table: str,
    collection: str,
    dimensions: int = 8,
    max_tokens: int = 64,
    overlap: int = 8,
    batch_size: int = 50,
    metrics_port: int = 0,
    extra: str = "",
    capture: bool = False,
    source_url: str | None = None,
    limits: Mapping[str, float] | None = None,
    model: str = "text-embedding-test",
) -> str:
    """A vectorsync.toml for integration tests: SQL source (``capture``: with triggers; ``source_url``: read
    through a role of its own), fake OpenAI server, pgvector; ``limits`` in place of ``SHORT_LIMITS``; ``model``: the
    name the server is asked for (an OpenAI model's, ``text-embedding-3-small``: its calls counted with cl100k
    before they are sent, as the server counts them)."""
    worker = {"batch_size": batch_size, "max_retries": 2, "retry_delay": 0.2, "metrics_port": metrics_port}
    head = worker_sections(broker=broker, database=database, dimensions=dimensions, **worker, **(limits or {}))
    source = sql_collection(
        database=source_url or database,
        table=table,
        collection=collection,
        max_tokens=max_tokens,
        overlap=overlap,
        capture=capture,
    )
    return f"""
{head}
[cache]
url = "{cache}"

[models.fake_openai]
provider = "openai"
model = "{model}"
dimensions = {dimensions}
base_url = "{openai_url}"
timeout = 5

[embeddings]
chain = ["fake_openai"]
batch_size = 64
max_attempts = 2
max_wait_seconds = 0.2
cooldown_seconds = 1

{source}
{extra}
"""


#: The tests' workers' short [worker] time limits, and the broker's visibility timeout above them.
SHORT_LIMITS = {"time_limit": 50, "index_time_limit": 55, "visibility_timeout": 60}


def worker_sections(*, broker: str, database: str, dimensions: int, **worker: float) -> str:
    """The [broker], [worker] and [vectors] sections every integration test's settings share: ``SHORT_LIMITS``
    (``worker`` may replace them), pgvector at ``database``; ``worker`` adds [worker] keys."""
    limits = SHORT_LIMITS | worker
    visibility_timeout = limits.pop("visibility_timeout")
    keys = "".join(f"{key} = {value}\n" for key, value in limits.items())
    return (
        f'[broker]\nurl = "{broker}"\nvisibility_timeout = {visibility_timeout}\n\n'
        f"[worker]\n{keys}\n"
        f'[vectors]\nstore = "pgvector"\nurl = "{database}"\ndimensions = {dimensions}\n'
    )


def sql_collection(
    *, database: str, table: str, collection: str, max_tokens: int = 64, overlap: int = 8, capture: bool = False
) -> str:
    """The settings of a collection over a CrmTable: its SQL source (with ``capture``, triggers write its
    changes to the outbox) and its chunker."""
    return f"""
[collections.{collection}.source]
kind = "sql"
capture = "{"trigger" if capture else "off"}"
url = "{database}"
table = "{table}"
text = "{{title}}\\n\\n{{body}}"
metadata = ["kind"]
updated_at = "updated_at"

[collections.{collection}.chunker]
max_tokens = {max_tokens}
overlap = {overlap}
"""


def pushed_collection(folder: Path, database: str, name: str, *, dimensions: int, keywords: bool = False) -> Path:
    """A settings file for a pushed collection ``name`` on pgvector (fake embeddings, no cache); with
    ``keywords``, it keeps the keyword index (``search.keywords``)."""
    config = folder / "vectorsync.toml"
    config.write_text(
        f'[vectors]\nstore = "pgvector"\nurl = "{database}"\ndimensions = {dimensions}\n'
        f'[embeddings]\ncache_ttl_days = 0\n[collections.{name}.source]\nkind = "push"\n'
        + (f"[collections.{name}.search]\nkeywords = true\n" if keywords else "")
    )
    return config
