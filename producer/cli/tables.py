"""The CLI's tables: laid out so no word and no number is ever cut across two lines, and plain text.

Rich shrinks the widest columns of a table too wide for its console below their longest word, then folds
that word mid-way ("collec/tion", "135,88/5"). Here each column first gets its longest word (a ``whole``
column, numbers and ids, its longest value), the room left goes to the columns that want it (the shortest
wants met first), and when even the words do not fit, each row is one line of ``column: value`` pairs
(wrapped between words on a terminal, whole on a pipe). No box is drawn (a pipe gets no colour either, as
from any console that is not a terminal); an empty table is a sentence instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from producer.cli.safe_text import cell

__all__ = ["Column", "layout", "show"]

#: A table's cell: plain text (escaped as it is printed) or a styled Text.
Cell = str | Text
#: Spaces between two columns.
GAP = 2


@dataclass(frozen=True)
class Column:
    """A table's column: its header, ``whole`` for values never wrapped (numbers, ids, dates), ``right`` to align
    them right (counts one reads down)."""

    header: str
    whole: bool = False
    right: bool = False


def _plain(value: Cell) -> Text:
    return value if isinstance(value, Text) else cell(value)


def _longest_word(text: str) -> int:
    return max((cell_len(word) for word in text.split()), default=0)


def _longest_line(text: str) -> int:
    return max((cell_len(line) for line in text.splitlines()), default=0)


def _shares(needs: list[int], wants: list[int], room: int) -> list[int]:
    """Widths from ``needs`` up towards ``wants`` within ``room``: the shortest wants are met first, and the
    columns still short share what is left evenly."""
    widths = list(needs)
    spare = room - sum(needs)
    order = sorted(range(len(widths)), key=lambda i: wants[i] - needs[i])
    for done, i in enumerate(order):
        give = min(wants[i] - widths[i], spare // (len(order) - done))
        widths[i] += max(give, 0)
        spare -= max(give, 0)
    return widths


def layout(columns: Sequence[Column], rows: Sequence[Sequence[Cell]], *, width: int) -> Table | None:
    """The table for ``rows`` in ``width`` columns, or None when their words alone do not fit in it."""
    texts = [[_plain(value) for value in row] for row in rows]
    needs, wants = [], []
    for index, column in enumerate(columns):
        values = [column.header, *(row[index].plain for row in texts)]
        measure = _longest_line if column.whole else _longest_word
        needs.append(max(measure(value) for value in values))
        wants.append(max(_longest_line(value) for value in values))
    room = width - GAP * (len(columns) - 1)
    if sum(needs) > room:
        return None
    # The gap between columns is a column of its own: rich before 14.3 gave a padded column of a set width one
    # cell less (the id "…885#0" lost its last character), a column without padding gets exactly its width.
    table = Table(box=None, pad_edge=False, padding=0)
    for index, (column, size) in enumerate(zip(columns, _shares(needs, wants, room), strict=True)):
        if index:
            table.add_column("", width=GAP, no_wrap=True)
        table.add_column(
            column.header,
            width=size,
            no_wrap=column.whole,
            overflow="fold",
            justify="right" if column.right else "left",
        )
    for row in texts:
        table.add_row(*_gapped(row))
    return table


def _gapped(row: Sequence[Text]) -> list[Text]:
    """``row`` with an empty cell in each gap column."""
    cells: list[Text] = []
    for index, value in enumerate(row):
        cells.extend([Text(), value] if index else [value])
    return cells


def show(console: Console, columns: Sequence[Column], rows: Sequence[Sequence[Cell]], *, empty: str) -> None:
    """Print ``rows`` as a table that fits ``console``, a line of ``column: value`` pairs each when it cannot,
    or the sentence ``empty`` when there are none."""
    if not rows:
        console.print(Text(empty), soft_wrap=not console.is_terminal)
        return
    table = layout(columns, rows, width=console.width)
    if table is not None:
        console.print(table)
        return
    for row in rows:
        pairs = [(f"{column.header}: ", _plain(value)) for column, value in zip(columns, row, strict=True)]
        line = Text("; ").join(Text.assemble(*pair) for pair in pairs)
        console.print(line, soft_wrap=not console.is_terminal)
