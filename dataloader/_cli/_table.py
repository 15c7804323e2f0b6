"""What ``python -m dataloader bench`` and ``tune`` print and write: aligned tables, JSON files."""

from __future__ import annotations

import errno
import json
from typing import Any


def cell(value: Any, spec: str = "") -> str:
    """``value`` formatted with the format ``spec``; "-" for None (nothing measured)."""
    return "-" if value is None else format(value, spec)


def aligned(cells: list[list[str]], align: str = "") -> str:
    """Rows of cells (the header first) as a table with a rule under the header.

    ``align`` has one character per column, ``<`` (left) or ``>`` (right); the columns after
    it are right-aligned. Trailing blanks are stripped.
    """
    align = align.ljust(len(cells[0]), ">")
    width = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    lines = ["  ".join(c.ljust(w) if a == "<" else c.rjust(w) for c, w, a in zip(row, width, align))
             for row in cells]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(line.rstrip() for line in lines)


def write_json(path: str, result: Any) -> str | None:
    """Write ``result`` to ``path`` as JSON, one level of indentation per nesting; why it could not
    be written (a disk that filled during the run, say: the path was tried before it), or None."""
    try:
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(result, handle, indent=1)
    except OSError as error:
        code = errno.errorcode.get(error.errno or 0, "")
        reason = f"{code}: {error.strerror}" if code and error.strerror else str(error)
        return (f"cannot write --json {path!r} ({reason}); the table above has the results. Free "
                "room there or name another file.")
    return None
