"""``vectorsync collections list|create|reset|recount|set|drop``: the lifecycle of collections, and their rules.

Destructive commands (reset, drop) ask on a terminal and take ``--yes`` otherwise: a script that pipes
nothing in is refused rather than taken as consenting.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from producer.cli.console import confirmed, guarded, open_collections, out, say
from producer.cli.group import Group
from producer.cli.safe_text import printable
from producer.cli.tables import Column, show
from producer.cli.values import TypedValues

if TYPE_CHECKING:
    from store.lifecycle import Emptied, RulesChanged

__all__ = ["collections_app"]

collections_app = typer.Typer(
    help="List, create, empty (reset) and drop collections.", no_args_is_help=False, cls=Group
)
Yes = Annotated[bool, typer.Option("--yes", "-y", help="do not ask (needed when stdin is not a terminal)")]


@collections_app.callback(invoke_without_command=True)
def _default(ctx: typer.Context) -> None:
    """With no subcommand: list them."""
    if ctx.invoked_subcommand is None:
        list_collections()


@collections_app.command("list", cls=TypedValues)
def list_collections() -> None:
    """The declared collections and those the store holds, with their chunk counts, and the generations of
    migrated ones (``vectorsync migrate``); nothing is created."""
    settings, collections = open_collections()

    def chunks(name: str, held: set[str]) -> str:
        if name not in held:
            return "not created"
        found = guarded(lambda: collections.chunks(name))
        return "other vector settings" if found is None else f"{found:,}"

    with collections:
        held = set(guarded(collections.names))
        aliases = {alias.collection: alias for alias in guarded(collections.aliases)}
        physical = {g.physical for alias in aliases.values() for g in alias.generations}
        rows: list[tuple[str, str, str, str]] = []
        for name in sorted((held - physical) | set(settings.collections) | set(aliases)):
            kind: str = settings.collections[name].source.kind if name in settings.collections else "-"
            alias = aliases.get(name)
            if alias is None:
                rows.append((name, kind, "", chunks(name, held)))
                continue
            rows.append((name, kind, f"reads g{alias.live}", ""))
            for generation in alias.generations:
                count = guarded(lambda g=generation: collections.generation_chunks(g))  # type: ignore[misc]
                rows.append(
                    (
                        f"  {generation.name}",
                        ", ".join(generation.chain),
                        f"{alias.status(generation)}, {generation.dimensions}-d",
                        "not created" if count is None else f"{count:,}",
                    )
                )
    columns = [Column("collection"), Column("source / chain"), Column("generation"), Column("chunks", right=True)]
    show(out, columns, rows, empty="no collections: none is declared in the settings, and the store holds none")
    if any(row[3] == "not created" for row in rows):
        say("vectorsync init creates the declared collections that are missing (a worker does at its start)")


@collections_app.command(cls=TypedValues)
def create(name: str) -> None:
    """Create a collection; one that exists already is an error."""
    settings, collections = open_collections()
    with collections:
        guarded(lambda: collections.create(name))
    say(f"created collection {name}")
    if name not in settings.collections:
        say(
            f"note: {name} is not declared in the settings; workers index declared collections only "
            f"(add [collections.{name}])"
        )


@collections_app.command(cls=TypedValues)
def reset(name: str, yes: Yes = False) -> None:
    """Empty a collection and forget its ledger entries and failures; its schema and indexes stay."""
    settings, collections = open_collections()
    with collections:
        chunks = guarded(lambda: collections.chunks(name))
        confirmed(
            f"Empty collection {name!r} ({_chunks(chunks)}) and forget what the ledger holds of it?",
            action=f"emptying collection {name!r}",
            yes=yes,
        )
        emptied = guarded(lambda: collections.reset(name))
    say(f"emptied {name}: {_removed(emptied)}; its schema and indexes are kept")
    source = settings.collections.get(name)
    if source is not None and source.source.kind != "push":
        say(f"`vectorsync reindex {name}` indexes it again")


@collections_app.command(cls=TypedValues)
def recount(name: str) -> None:
    """Count a collection's keyword statistics (BM25's document counts) anew from its rows."""
    _, collections = open_collections()
    with collections:
        off = guarded(lambda: collections.recount(name))
    say(
        f"recounted the keyword statistics of {name}: "
        + (f"{_many(off, 'term was', 'terms were')} off, now exact" if off else "they were exact")
    )


@collections_app.command("set", cls=TypedValues)
def set_rules(
    name: str,
    required_filter: Annotated[
        str | None,
        typer.Option("--required-filter", help="fields every search must pin, comma-separated; '' for none"),
    ] = None,
    keywords: Annotated[
        bool | None, typer.Option("--keywords/--no-keywords", help="keep a keyword index (keyword, hybrid search)")
    ] = None,
    language: Annotated[str | None, typer.Option("--language", help="the keyword analyzer's language")] = None,
) -> None:
    """Change the rules a collection holds for every process: its required filter, its keyword index."""
    changes: dict[str, object] = {}
    if required_filter is not None:
        changes["required_filter"] = tuple(f.strip() for f in required_filter.split(",") if f.strip())
    if keywords is not None:
        changes["keywords"] = keywords
    if language is not None:
        changes["language"] = language
    if not changes:
        guarded(lambda: _nothing_to_set(name))
    _, collections = open_collections()
    with collections:
        changed = guarded(lambda: collections.set_rules(name, **changes))
    for each in changed:
        say(f"{printable(each.physical)}: {_rules_change(each)}")
    say("processes that hold it open take the new rules within a few seconds; none needs a restart")


def _nothing_to_set(name: str) -> None:
    from store.errors import ConfigError

    raise ConfigError(
        f"nothing to set for {name!r}: pass --required-filter FIELDS, --keywords or --no-keywords, or --language "
        "(`vectorsync collections set --help`)"
    )


def _rules_change(changed: RulesChanged) -> str:
    if changed.before == changed.after:
        return f"unchanged ({changed.after.describe()})"
    cost = "nothing re-embedded"
    if changed.after.keywords and changed.analyzed:
        cost = f"the stored text of {_many(changed.analyzed, 'chunk', 'chunks')} analyzed, {cost}"
    elif changed.before.keywords and not changed.after.keywords:
        cost = f"its keyword index emptied, {cost}"
    return f"{changed.before.describe()} -> {changed.after.describe()} ({cost})"


@collections_app.command(cls=TypedValues)
def drop(name: str, yes: Yes = False) -> None:
    """Delete a collection with everything in it, and forget its ledger entries and failures."""
    settings, collections = open_collections()
    with collections:
        chunks = guarded(lambda: collections.chunks(name))  # a missing one: the error naming the others
        confirmed(
            f"Drop collection {name!r} ({_chunks(chunks)}) and forget what the ledger holds of it?",
            action=f"dropping collection {name!r}",
            yes=yes,
        )
        emptied = guarded(lambda: collections.drop(name))
    say(f"dropped {name}: {_removed(emptied)}")
    if name in settings.collections:
        say(
            f"note: {name} is still declared in the settings, so a worker's start or vectorsync init creates it "
            f"again, empty: remove [collections.{name}] to keep it gone (`reset` empties it and keeps it)"
        )


def _removed(emptied: Emptied) -> str:
    forgotten = emptied.forgotten
    return (
        f"{_chunks(emptied.chunks)} deleted, "
        f"{_many(forgotten.entries, 'ledger entry', 'ledger entries')} and "
        f"{_many(forgotten.failures, 'failure', 'failures')} forgotten"
    )


def _many(count: int, one: str, many: str) -> str:
    return f"{count:,} {one if count == 1 else many}"


def _chunks(count: int | None) -> str:
    return "chunks made with other vector settings" if count is None else _many(count, "chunk", "chunks")
