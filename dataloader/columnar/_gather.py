"""A batch's rows gathered out of chunked columns, with NumPy or Arrow, a chunk at a time.

The datasets hold their rows in parts (the record batches of Arrow files, the
decoded row groups of Parquet files). A batch asks for rows in any order;
:func:`locate` finds each row's part and its offset in it, :class:`Runs`
groups the rows by part, and :func:`take_numbers`, :func:`take_bits` and
:func:`take_rows` copy them out with one ``take`` per part touched, so Python
runs per part, never per row. A part is a key into a ``sources`` mapping (a
list or a dict).
"""

from __future__ import annotations

from typing import Any, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa


def positions(indices: Any, length: int, kind: str) -> np.ndarray:
    """``indices`` as int64 row numbers; negative ones count from the end, as for a list."""
    found = np.asarray(indices)
    if found.dtype.kind not in "iu" and found.size:
        raise TypeError(f"{kind} indices must be integers; got {found.dtype} values: {indices!r}")
    if found.ndim != 1:
        raise TypeError(f"{kind} indices must be a flat sequence of integers; got shape {found.shape}.")
    rows = found.astype(np.int64, copy=False)
    if rows.size and (rows.min() < 0 or rows.max() >= length):
        rows = np.where(rows < 0, rows + length, rows)  # a new array: the caller's is left alone
        bad = (rows < 0) | (rows >= length)
        if bad.any():
            raise IndexError(f"index {found[bad][0]} is out of range for {kind} of length {length}")
    return rows


def locate(rows: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(part, offset in the part) of each row; ``starts`` holds each part's first row, ascending,
    and no part is empty."""
    if len(starts) == 1:
        return np.zeros(len(rows), dtype=np.intp), rows
    part = np.searchsorted(starts, rows, side="right") - 1
    return part, rows - starts[part]


class Runs:
    """The rows of a batch grouped by the part each lies in.

    ``single`` is that part when every row lies in one (no grouping needed),
    else None, and the rows come out in ``order`` (by part, stable):
    :meth:`spans` gives each part's slice of it, and ``inverse`` puts rows
    taken in that order back in the batch's order.
    """

    __slots__ = ("single", "order", "inverse", "_parts", "_bounds")

    def __init__(self, part: np.ndarray) -> None:
        self.single: int | None = None
        if len(part) and part.min() == part.max():
            self.single = int(part[0])
            return
        self.order = np.argsort(part, kind="stable")
        ordered = part[self.order]
        cuts = np.flatnonzero(ordered[1:] != ordered[:-1]) + 1
        self._bounds = np.concatenate(([0], cuts, [len(part)])).tolist()
        self._parts = ordered[self._bounds[:-1]].tolist() if len(part) else []
        self.inverse = np.empty(len(part), dtype=np.intp)
        self.inverse[self.order] = np.arange(len(part))

    def parts(self) -> list[int]:
        """The parts touched, ascending."""
        return [self.single] if self.single is not None else list(self._parts)

    def spans(self) -> Iterator[tuple[int, slice]]:
        """(part, its rows' slice of ``order``) for each part touched."""
        for part, start, stop in zip(self._parts, self._bounds, self._bounds[1:]):
            yield part, slice(start, stop)


def take_numbers(sources: Sequence | Mapping, runs: Runs, items: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``out[k] = sources[part of row k][items[k]]`` (rows along axis 0), one ``np.take`` per part.

    ``items`` must be in range: ``mode="clip"`` spares NumPy the private
    buffer it fills first under ``mode="raise"``, so ``out`` is written once.
    """
    if runs.single is not None:
        return np.take(sources[runs.single], items, axis=0, out=out, mode="clip")
    ordered = items[runs.order]
    scratch = np.empty_like(out)
    for part, span in runs.spans():
        np.take(sources[part], ordered[span], axis=0, out=scratch[span], mode="clip")
    return np.take(scratch, runs.inverse, axis=0, out=out, mode="clip")


def take_bits(sources: Sequence | Mapping, runs: Runs, bits: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Booleans out of Arrow's bit-packed buffers: ``sources`` are the bytes (uint8 arrays),
    ``bits`` each row's bit number in its part; ``out`` is a bool array."""
    octets = out.view(np.uint8)
    take_numbers(sources, runs, bits >> 3, octets)
    np.right_shift(octets, (bits & 7).astype(np.uint8), out=octets)
    np.bitwise_and(octets, 1, out=octets)
    return out


def take_rows(tables: Sequence | Mapping, runs: Runs, offsets: np.ndarray) -> pa.Table:
    """The rows of Arrow ``tables`` (one per part) in the batch's order, as one table."""
    if runs.single is not None:
        return tables[runs.single].take(pa.array(offsets))
    ordered = offsets[runs.order]
    pieces = [tables[part].take(pa.array(ordered[span])) for part, span in runs.spans()]
    return pa.concat_tables(pieces).combine_chunks().take(pa.array(runs.inverse))
