"""Commands whose arguments are values a person types (ids, a query): one that starts with ``-`` reads as an
option, and the parser's "No such option: -0" named neither the value typed nor the fix."""

from __future__ import annotations

from typing import Any

from typer.core import TyperCommand

__all__ = ["TypedValues"]


class TypedValues(TyperCommand):
    """A Typer command whose error for an unknown short option (``-00``, which the parser reads as ``-0``)
    names the value as typed and says to put it after ``--``."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        typed = list(args)
        try:
            return super().parse_args(ctx, args)
        except Exception as exc:
            if type(exc).__name__ != "NoSuchOption":  # click's, or that of the click Typer carries (typer._click)
                raise
            refused: Any = exc
            value = next((arg for arg in typed if arg.startswith(refused.option_name)), refused.option_name)
            if value.startswith("--"):  # a long option, named whole (and "did you mean" it): a typo, likely
                raise
            command = ctx.command_path.partition(" ")[2] or ctx.info_name  # without the program's name
            raise refused.__class__(
                value,
                ctx=ctx,
                message=(
                    f"no such option: {value!r}; a value that starts with '-' goes after '--', "
                    f"e.g. vectorsync {command} ... -- {value}"
                ),
            ) from None
