"""One benchmark table: rows of measured figures, each against its limit or target, printed and saved as JSON."""

from __future__ import annotations

import json
import os
import platform
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

__all__ = ["Row", "machine", "print_table", "table", "write_json"]


@dataclass(frozen=True)
class Row:
    """One measured figure: ``value`` in ``unit``, and its ``target`` when the issue set one.

    ``ratio`` is value against a limit measured in the same run (e.g. pipeline
    against raw encode); ``ok`` says whether the target holds, or None without one.
    """

    section: str
    name: str
    value: float
    unit: str
    ratio: float | None = None
    target: str = ""
    ok: bool | None = None
    detail: str = ""
    #: The bench section (``python -m bench --only`` name) that measured it; set by ``bench/__main__.py``.
    part: str = ""
    #: The measure whose target (``bench.targets.TARGETS``) judges the row, or "" for a row of no target there.
    measure: str = ""


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    return {
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
    }


def _cell(value: float | None, digits: int = 3) -> str:
    if value is None:
        return ""
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.{digits}g}"


def table(rows: list[Row]) -> str:
    """The rows as one Markdown table (also what docs/benchmarks.md shows)."""
    lines = ["| section | measure | value | ratio | target | met |", "|---|---|---|---|---|---|"]
    for r in rows:
        met = "" if r.ok is None else ("yes" if r.ok else "**no**")
        lines.append(f"| {r.section} | {r.name} | {_cell(r.value)} {r.unit} | {_cell(r.ratio)} | {r.target} | {met} |")
    return "\n".join(lines)


def print_table(rows: list[Row]) -> str:
    """``table(rows)``, printed and returned."""
    text = table(rows)
    print(text)
    return text


def write_json(rows: list[Row], path: Path, **extra: Any) -> None:
    """Save the rows, the machine and ``extra`` (arguments, timings) as JSON."""
    path.write_text(json.dumps({"machine": machine(), **extra, "rows": [asdict(r) for r in rows]}, indent=2) + "\n")
