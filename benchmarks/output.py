"""What the tools print and write: table cells, aligned plain-text tables, and JSON files."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any, Sequence


def cell(value: Any, spec: str = "") -> str:
    """``value`` formatted with the format ``spec``; "-" for None (nothing measured)."""
    return "-" if value is None else format(value, spec)


def aligned(
    cells: list[list[str]], align: str = "", widths: Sequence[int] = (), sep: str = "  ",
    rule: bool = True,
) -> str:
    """Rows of cells (the header first) as a table, trailing blanks stripped.

    ``align`` has one character per column, ``<`` (left) or ``>`` (right); the columns after
    it are right-aligned. A column is as wide as its widest cell, and at least ``widths[i]``.
    ``rule`` puts a line of dashes under the header.
    """
    count = len(cells[0])
    align = align.ljust(count, ">")
    floor = list(widths) + [0] * count
    width = [max([floor[i]] + [len(line[i]) for line in cells]) for i in range(count)]
    lines = [
        sep.join(c.ljust(w) if a == "<" else c.rjust(w) for c, w, a in zip(line, width, align))
        for line in cells
    ]
    if rule:
        lines.insert(1, "-" * len(lines[0]))
    return "\n".join(line.rstrip() for line in lines)


def write_json(path: str, result: Any) -> None:
    """Write ``result`` to ``path`` as JSON, one level of indentation per nesting."""
    with open(path, "w") as handle:
        json.dump(result, handle, indent=1)


def write_runs(path: str, runs: Sequence[Any], rows: list[dict]) -> None:
    """Write a side tool's runs (dataclasses) and summary rows to ``path`` as JSON."""
    write_json(path, {"runs": [asdict(r) for r in runs], "rows": rows})
