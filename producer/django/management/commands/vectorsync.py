"""``manage.py vectorsync ARGS``: the ``vectorsync`` command, with the settings file the project names.

    python manage.py vectorsync reindex notes --wait
    python manage.py vectorsync status
    call_command("vectorsync", "search", "notes", "onboarding")

Every argument goes to the command as it is (``manage.py vectorsync --help`` is vectorsync's help), except
Django's own ``--settings`` and ``--pythonpath``, which ``manage.py`` has applied already. The exit code is
the command's; from ``call_command`` a non-zero one is a CommandError.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

import typer
from django.core.management.base import BaseCommand, CommandError, CommandParser
from typer.exceptions import TyperException

from producer.cli.app import app
from producer.django.conf import apply_config

__all__ = ["Command", "without_django_options"]

#: Options ``manage.py`` reads before any command runs.
_DJANGO_OPTIONS = ("--settings", "--pythonpath")


def without_django_options(args: list[str]) -> list[str]:
    """``args`` less ``--settings X``, ``--settings=X``, ``--pythonpath X`` and ``--pythonpath=X``."""
    kept: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in _DJANGO_OPTIONS:
            skip = True
        elif not arg.startswith(tuple(f"{option}=" for option in _DJANGO_OPTIONS)):
            kept.append(arg)
    return kept


class Command(BaseCommand):
    help = "Run a vectorsync command (reindex, status, search, ...) with this project's VECTORSYNC settings."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("args", nargs=argparse.REMAINDER, help="the vectorsync command and its arguments")

    def run_from_argv(self, argv: list[str]) -> None:
        """``manage.py vectorsync ...``: vectorsync parses its arguments itself and exits with its code."""
        apply_config()
        prog = f"{os.path.basename(argv[0])} {argv[1]}"
        app(args=without_django_options(argv[2:]), prog_name=prog)

    def handle(self, *args: str, **options: Any) -> None:
        """``call_command("vectorsync", ...)``. Raises CommandError for a non-zero exit."""
        apply_config()
        try:
            code = app(args=list(args), prog_name="manage.py vectorsync", standalone_mode=False)
        except typer.Exit as exc:
            code = exc.exit_code
        except TyperException as exc:  # Typer's own click: its usage errors are not click.ClickException
            message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
            raise CommandError(
                f"vectorsync {' '.join(args)}: {message}", returncode=getattr(exc, "exit_code", 2)
            ) from None
        if isinstance(code, int) and code != 0:
            raise CommandError(f"vectorsync {' '.join(args)} exited with {code}", returncode=code)
