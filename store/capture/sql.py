"""Every statement of change capture, in one place: the outbox, the trigger function and its triggers, and
what the relay, ``doctor`` and ``status`` ask.

DDL cannot bind parameters, so it is built here from identifiers read from the
database's own catalog (always double-quoted, quotes doubled) and from
collection names, which ``check_collection_name`` limits to ``[a-z0-9_]``.
Nothing a record holds is ever part of a statement's text.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

__all__ = [
    "CHANNEL",
    "CURRENT",
    "INSTALLED",
    "OUTBOX",
    "OUTBOX_EXISTS",
    "OUTBOX_SCHEMA",
    "Target",
    "claim",
    "delete",
    "function_source",
    "install_ddl",
    "outbox_ddl",
    "quote",
    "remove_ddl",
    "stats",
    "waiting",
]

#: The outbox table, in the schema the source URL's role creates tables in (``current_schema()``, read once
#: and named in every statement, so the triggers, the relay and ``status`` agree on the one outbox).
OUTBOX = "vectorsync_outbox"
#: The channel of the payload-free wake-up NOTIFY.
CHANNEL = "vectorsync_outbox"


def quote(identifier: str) -> str:
    """``identifier`` as PostgreSQL reads a quoted identifier: exactly as written."""
    return '"' + identifier.replace('"', '""') + '"'


@dataclass(frozen=True, slots=True)
class Target:
    """What the triggers of one collection need: its table, its id column and the columns it reads.

    ``compared`` are the columns its text, metadata and ``where`` read: an ``UPDATE`` that changes none of
    them records nothing. ``relay_role`` is the role of ``source.url``, which relays: it claims and deletes
    the outbox's rows, so it is granted that where another role (a DBA running ``capture sql``) owns them.
    """

    collection: str
    schema: str
    table: str
    id: str
    compared: tuple[str, ...]
    notify: bool = True
    relay_role: str | None = None
    #: Where the outbox is: the source URL role's ``current_schema()`` (the table may be in another schema).
    outbox_schema: str = "public"

    @property
    def function(self) -> str:
        return f"vs_capture_{self.collection}"

    @property
    def triggers(self) -> dict[str, str]:
        """Trigger name to the event it fires on."""
        return {
            f"vs_{self.collection}_{short}": event
            for short, event in (("ins", "INSERT"), ("upd", "UPDATE"), ("del", "DELETE"), ("trn", "TRUNCATE"))
        }

    @property
    def qualified_table(self) -> str:
        return f"{quote(self.schema)}.{quote(self.table)}"


def outbox_ddl(schema: str, relay_role: str | None = None) -> list[str]:
    """The outbox: one row per changed id (or a TRUNCATE), written in the writer's own transaction; with
    ``relay_role``, that role may claim (``FOR UPDATE``) and delete its rows."""
    grant = [f"GRANT SELECT, UPDATE, DELETE ON {quote(schema)}.{OUTBOX} TO {quote(relay_role)}"] if relay_role else []
    return [
        f"CREATE TABLE IF NOT EXISTS {quote(schema)}.{OUTBOX} ("
        "seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "
        "collection text NOT NULL, "
        "record_id text, "
        "truncated boolean NOT NULL DEFAULT false, "
        "created_at timestamptz NOT NULL DEFAULT clock_timestamp())",
        *grant,
    ]


def function_source(target: Target) -> str:
    """The trigger function's body as ``pg_proc.prosrc`` holds it once ``install_ddl`` ran."""
    return _function_body(target) + "\n"


def _function_body(target: Target) -> str:
    outbox = f"{quote(target.outbox_schema)}.{OUTBOX}"
    name, key = f"'{target.collection}'", quote(target.id)
    changed = f"o.{key} IS NULL"
    if target.compared:
        new = ", ".join(f"n.{quote(c)}::text" for c in target.compared)
        old = ", ".join(f"o.{quote(c)}::text" for c in target.compared)
        changed += f" OR ROW({new}) IS DISTINCT FROM ROW({old})"
    notify = f"IF changed > 0 THEN PERFORM pg_notify('{CHANNEL}', ''); END IF;" if target.notify else ""
    # A new id (inserted, or a key changed to it), a row whose read columns changed, and an id no row has any
    # more (deleted, or a key changed from it; indexing a missing id deletes its chunks).
    table = target.qualified_table.replace("'", "''")
    return f"""
DECLARE
  changed bigint := 0;
BEGIN
  IF TG_RELID <> '{table}'::regclass THEN
    RAISE EXCEPTION USING MESSAGE = 'vectorsync: trigger ' || TG_NAME || ' runs a function that records the '
      'changes of {table} only, not of ' || TG_RELID::regclass::text;
  END IF;
  IF TG_OP = 'INSERT' THEN
    INSERT INTO {outbox} (collection, record_id) SELECT {name}, n.{key}::text FROM vectorsync_new n;
  ELSIF TG_OP = 'UPDATE' THEN
    INSERT INTO {outbox} (collection, record_id)
      SELECT {name}, n.{key}::text FROM vectorsync_new n LEFT JOIN vectorsync_old o ON o.{key} = n.{key}
       WHERE {changed}
      UNION ALL
      SELECT {name}, o.{key}::text FROM vectorsync_old o
       WHERE NOT EXISTS (SELECT FROM vectorsync_new n WHERE n.{key} = o.{key});
  ELSIF TG_OP = 'DELETE' THEN
    INSERT INTO {outbox} (collection, record_id) SELECT {name}, o.{key}::text FROM vectorsync_old o;
  ELSE
    INSERT INTO {outbox} (collection, truncated) VALUES ({name}, true);
  END IF;
  GET DIAGNOSTICS changed = ROW_COUNT;
  {notify}
  RETURN NULL;
END"""


def install_ddl(target: Target) -> list[str]:
    """The outbox, the function and one statement-level trigger per event. Run again, it replaces them."""
    function = f"{quote(target.schema)}.{quote(target.function)}"
    statements = [
        *outbox_ddl(target.outbox_schema, target.relay_role),
        # SECURITY DEFINER: any role that may write the table records its changes, without rights on the outbox.
        f"CREATE OR REPLACE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER "
        f"SET search_path = pg_catalog, pg_temp AS $vectorsync${function_source(target)}$vectorsync$",
        # Whoever may run it may attach it to a table of their own and write the outbox as its owner: nobody but
        # the owner (a trigger that fires needs no right to run its function; creating one does).
        f"REVOKE EXECUTE ON FUNCTION {function}() FROM PUBLIC",
    ]
    for trigger, event in target.triggers.items():
        referencing = {
            "INSERT": "REFERENCING NEW TABLE AS vectorsync_new ",
            "UPDATE": "REFERENCING OLD TABLE AS vectorsync_old NEW TABLE AS vectorsync_new ",
            "DELETE": "REFERENCING OLD TABLE AS vectorsync_old ",
            "TRUNCATE": "",
        }[event]
        statements += [
            f"DROP TRIGGER IF EXISTS {quote(trigger)} ON {target.qualified_table}",
            f"CREATE TRIGGER {quote(trigger)} AFTER {event} ON {target.qualified_table} {referencing}"
            f"FOR EACH STATEMENT EXECUTE FUNCTION {function}()",
        ]
    return statements


def remove_ddl(target: Target) -> list[str]:
    """The triggers and the function gone; the outbox and its pending rows stay until the relay drains them."""
    drops = [f"DROP TRIGGER IF EXISTS {quote(trigger)} ON {target.qualified_table}" for trigger in target.triggers]
    return [*drops, f"DROP FUNCTION IF EXISTS {quote(target.schema)}.{quote(target.function)}()"]


#: The schema the outbox lives in for the connected role; NULL when its search_path names no existing schema.
OUTBOX_SCHEMA = sa.text("SELECT current_schema()")

#: The outbox's name where it exists (``:outbox``, schema-qualified), else NULL.
OUTBOX_EXISTS = sa.text("SELECT to_regclass(:outbox)::text")


def claim(schema: str) -> sa.TextClause:
    """Up to ``limit`` rows of ``names``, oldest first, that no other relay holds, with when each was written
    (epoch seconds, taken inside the writer's transaction: where freshness is measured from)."""
    return sa.text(
        f"SELECT seq, collection, record_id, truncated, extract(epoch FROM created_at) FROM {quote(schema)}.{OUTBOX} "
        "WHERE collection = ANY(:names) ORDER BY seq LIMIT :limit FOR UPDATE SKIP LOCKED"
    )


def delete(schema: str) -> sa.TextClause:
    return sa.text(f"DELETE FROM {quote(schema)}.{OUTBOX} WHERE seq = ANY(:seqs)")


def stats(schema: str) -> sa.TextClause:
    """Pending rows per collection and the age of the oldest, in seconds."""
    return sa.text(
        f"SELECT collection, count(*), extract(epoch FROM clock_timestamp() - min(created_at)) "
        f"FROM {quote(schema)}.{OUTBOX} GROUP BY collection ORDER BY collection"
    )


def waiting(schema: str) -> sa.TextClause:
    """The rows that will reindex one record of a collection (its id, or a TRUNCATE marker), and the oldest's
    time."""
    return sa.text(
        f"SELECT count(*), min(created_at) FROM {quote(schema)}.{OUTBOX} "
        "WHERE collection = :collection AND (record_id = :record_id OR truncated)"
    )


#: Which of a table's triggers and which functions exist, and whether each trigger fires in ordinary sessions
#: (not disabled, nor set to fire only under ``session_replication_role = replica``).
INSTALLED = sa.text(
    "SELECT t.tgname, t.tgenabled IN ('O', 'A') FROM pg_trigger t "
    "WHERE t.tgrelid = to_regclass(:table) AND t.tgname = ANY(:triggers) AND NOT t.tgisinternal "
    "UNION ALL "
    "SELECT p.proname, true FROM pg_proc p JOIN pg_namespace s ON s.oid = p.pronamespace "
    "WHERE s.nspname = :schema AND p.proname = :function"
)

#: Whether the function is the one ``install_ddl`` would make (its body) and the connected role may relay
#: (claim and delete) the outbox's rows: a capture someone else installed as these settings ask.
CURRENT = sa.text(
    "SELECT p.prosrc = :source AND has_table_privilege(to_regclass(:outbox), 'SELECT') "
    "AND has_table_privilege(to_regclass(:outbox), 'UPDATE') AND has_table_privilege(to_regclass(:outbox), 'DELETE') "
    "FROM pg_proc p JOIN pg_namespace s ON s.oid = p.pronamespace WHERE s.nspname = :schema AND p.proname = :function"
)
