"""The ``vectorsync`` Typer app: the ``--config`` option, and each command module's command registered here.

Command modules define plain functions and never import this module, so no import runs in a circle.
"""

from __future__ import annotations

import os
from typing import Annotated

import typer

from producer.cli.ask import ask
from producer.cli.capture import capture_app, relay
from producer.cli.collections import collections_app
from producer.cli.console import err
from producer.cli.dev import dev
from producer.cli.discovery import DEV_MADE, clear, discover
from producer.cli.doctor import doctor
from producer.cli.eval import evaluate
from producer.cli.explain import explain
from producer.cli.failures import failures
from producer.cli.forget import forget
from producer.cli.group import Group
from producer.cli.index import index
from producer.cli.init import init
from producer.cli.migrate import migrate
from producer.cli.reconcile import reconcile
from producer.cli.reindex import reindex
from producer.cli.runs import runs_app
from producer.cli.search import search
from producer.cli.status import status
from producer.cli.values import TypedValues
from producer.cli.verify import verify

__all__ = ["app", "main"]

app = typer.Typer(
    help="Keep vector indexes in sync with your records.",
    no_args_is_help=True,
    cls=Group,
    pretty_exceptions_enable=False,
    add_completion=False,
    # Click's plain help, for every command: typer 0.29's Rich panels put a type beside each flag ("--json <bool>",
    # as if it took a value), draw boxes into a pipe, and cost a start ~0.05 s of imports (rich.markdown).
    rich_markup_mode=None,
)


@app.callback()
def _options(
    ctx: typer.Context,
    config: Annotated[str | None, typer.Option("--config", "-c", help="settings file (VECTORSYNC_CONFIG)")] = None,
) -> None:
    if config:
        os.environ["VECTORSYNC_CONFIG"] = config
    if ctx.invoked_subcommand == "dev":
        return  # it writes its own settings; a dev file found above would be the one it replaces
    where = discover()
    ctx.call_on_close(clear)
    if where.path is not None and where.how == DEV_MADE:
        err.print(f"settings: {where.path} ({DEV_MADE}; --config or VECTORSYNC_CONFIG reads another)", highlight=False)


#: Commands named otherwise than their function (``eval`` is a builtin's name).
NAMES: dict[object, str] = {evaluate: "eval"}
# The order here is the order ``vectorsync --help`` lists them in (Typer lists groups after commands).
for command in (
    reindex,
    index,
    reconcile,
    search,
    ask,
    evaluate,
    status,
    doctor,
    failures,
    explain,
    verify,
    forget,
    init,
    migrate,
    relay,
    dev,
):
    app.command(name=NAMES.get(command), cls=TypedValues)(command)
app.add_typer(collections_app, name="collections")
app.add_typer(capture_app, name="capture")
app.add_typer(runs_app, name="runs")


def main() -> None:
    """Console-script entry point."""
    app(prog_name="vectorsync")


if __name__ == "__main__":  # pragma: no cover
    main()
