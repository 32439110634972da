"""The CLI's command groups (the app, ``collections``, ``capture``, ``runs``): their help lists each command with
its whole summary, wrapped, where click's plain help cut it at about 60 characters with "..."."""

from __future__ import annotations

import sys
from typing import Any

from typer.core import TyperGroup

__all__ = ["Group"]


class Group(TyperGroup):
    """A Typer group whose ``--help`` gives each command's first sentence in full."""

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit=sys.maxsize)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
