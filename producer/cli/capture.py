"""``vectorsync capture enable|disable|sql|status NAME``: the triggers that write every change of a SQL source
to its outbox, whoever makes it; and ``vectorsync relay``, which moves them to the broker on its own."""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING, Annotated, Any

import typer

from producer.cli.console import guarded, out, say
from producer.cli.group import Group
from producer.cli.tables import Column, show
from producer.cli.values import TypedValues

if TYPE_CHECKING:
    from store.capture.control import CaptureState
    from store.settings import Settings

__all__ = ["capture_app", "capture_rows", "relay"]

capture_app = typer.Typer(
    help="Install, remove and inspect change capture on SQL sources.", no_args_is_help=True, cls=Group
)
#: The table of ``capture status`` and ``vectorsync status``: the counts and the lag whole.
CAPTURE_COLUMNS = [
    Column("collection"),
    Column("capture"),
    Column("pending", whole=True, right=True),
    Column("lag", whole=True),
    Column("problem"),
]
Name = Annotated[str, typer.Argument(help="a declared collection with a SQL source on PostgreSQL")]


def _settings() -> Settings:
    from store.settings import load_settings

    return guarded(load_settings)


@capture_app.command("enable", cls=TypedValues)
def enable(name: Name) -> None:
    """Install the outbox, the trigger function and the triggers on NAME's table; safe to run again."""
    from store.capture import control

    target = guarded(lambda: control.enable(_settings(), name))
    say(
        f"capture of {name} installed on {target.qualified_table} "
        f"({', '.join(target.compared) or 'the id only'} compared on UPDATE)"
    )


@capture_app.command("disable", cls=TypedValues)
def disable(name: Name) -> None:
    """Remove NAME's triggers and function; changes already in the outbox stay until the relay drains them."""
    from store.capture import control

    target = guarded(lambda: control.disable(_settings(), name))
    say(f"capture of {name} removed from {target.qualified_table}; rows already in the outbox still drain")


@capture_app.command("sql", cls=TypedValues)
def sql(
    name: Name, remove: Annotated[bool, typer.Option("--remove", help="the statements of `disable` instead")] = False
) -> None:
    """Print the DDL `enable` runs, for a DBA to run where vectorsync's role may not create triggers."""
    from store.capture import control

    statements = guarded(lambda: control.statements(_settings(), name, remove=remove))
    print("BEGIN;")
    for statement in statements:
        print(f"{statement};")
    print("COMMIT;")


@capture_app.command("status", cls=TypedValues)
def status() -> None:
    """Each captured collection: installed or not, changes waiting in the outbox, and the oldest one's age."""
    from store.capture.control import report

    states = guarded(lambda: report(_settings()))
    if not states:
        say("no collection asks for capture (collections.NAME.source.capture = 'trigger')")
        return
    show(out, CAPTURE_COLUMNS, capture_rows(states), empty="")


def capture_rows(states: list[CaptureState]) -> list[tuple[str, str, str, str, str]]:
    """One row per collection for ``capture status`` and ``vectorsync status``."""
    rows = []
    for state in states:
        if state.installation is None:
            installed = "unknown" if state.error else "off"
        else:
            installed = (
                "installed"
                if state.installation.complete
                else "partly"
                if not state.installation.absent
                else "not installed"
            )
        lag = "-" if state.lag_seconds is None else f"{state.lag_seconds:.1f}s"
        rows.append((state.collection, installed, str(state.pending), lag, state.problem or ""))
    return rows


def relay() -> None:
    """Move captured changes from the outbox to the broker until Ctrl-C: for setups whose workers cannot reach
    the source database (workers otherwise run the relay themselves, capture.relay)."""
    from store.capture import RelayThreads, relays_from_settings
    from store.process.defaults import default_producer

    settings = _settings()
    producer = guarded(default_producer)
    relays = guarded(lambda: relays_from_settings(settings, producer))
    if not relays:
        say("no declared SQL collection on PostgreSQL: nothing to relay")
        raise typer.Exit(1)
    threads = RelayThreads(relays).start()

    def stop(*_: Any) -> None:
        threads.stop_event.set()

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    say(f"relaying changes of {', '.join(name for r in relays for name in r.names)}; Ctrl-C stops")
    threads.wait()
    threads.stop()
