"""The rows of a window, made in bulk: per field one ``(rows, seq_len, *trailing)`` matrix filled
by one fancy assignment, and the segment ids and positions shared by every field."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ._fit import Placement

SEGMENT_IDS = "_segment_ids"
POSITIONS = "_positions"


@dataclass(frozen=True)
class Rows:
    """A window's rows: ``fields[name]`` of shape ``(rows, seq_len, *trailing)``, and per token
    its segment id (1, 2, ... in a row; 0 on padding) and position in its piece (0 on padding)."""

    fields: dict[str, np.ndarray]
    segment_ids: npt.NDArray[np.int32]
    positions: npt.NDArray[np.int32]

    def row(self, number: int) -> dict[str, Any]:
        """Row ``number`` as ``{field: tokens, field_segment_ids: ..., field_positions: ...}`` (views)."""
        ids, positions = self.segment_ids[number], self.positions[number]
        made: dict[str, Any] = {}
        for name, matrix in self.fields.items():
            made[name] = matrix[number]
            made[name + SEGMENT_IDS] = ids
            made[name + POSITIONS] = positions
        return made


def build(columns: dict[str, np.ndarray], pads: dict[str, Any], placement: Placement, seq_len: int) -> Rows:
    """Fill the rows of ``placement`` from ``columns`` (each field's tokens of the window, the
    samples concatenated in order); what no piece fills is the field's pad value."""
    rows = placement.rows
    order = np.lexsort((placement.offset, placement.row))
    row, offset = placement.row[order], placement.offset[order]
    length, source = placement.length[order], placement.source[order]
    segment = np.arange(len(row), dtype=np.int64) - np.searchsorted(row, row) + 1  # 1.. within a row
    total = int(length.sum())
    starts = np.cumsum(length) - length
    within = np.arange(total, dtype=np.int64) - np.repeat(starts, length)
    target = row * seq_len + offset
    contiguous = bool(np.array_equal(target, source))  # concat: the tokens already lie in row order
    where = within + np.repeat(target, length)
    ids = np.zeros(rows * seq_len, dtype=np.int32)
    positions = np.zeros(rows * seq_len, dtype=np.int32)
    ids[where] = np.repeat(segment, length)
    positions[where] = within
    taken = where if contiguous else within + np.repeat(source, length)
    fields = {name: _filled(column, pads[name], taken, where, contiguous, rows * seq_len) for name, column in columns.items()}
    return Rows(
        {name: matrix.reshape(rows, seq_len, *matrix.shape[1:]) for name, matrix in fields.items()},
        ids.reshape(rows, seq_len), positions.reshape(rows, seq_len),
    )


def _filled(column: np.ndarray, pad: Any, taken: np.ndarray, where: np.ndarray, contiguous: bool, size: int) -> np.ndarray:
    out = np.empty((size, *column.shape[1:]), dtype=column.dtype)
    if contiguous:  # the tokens, then padding after them
        used = len(taken)
        out[:used] = column[:used]
        out[used:] = pad
        return out
    out[...] = pad
    out[where] = column[taken]
    return out
