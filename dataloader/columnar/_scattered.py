"""Runs of short pieces read as one read per unit: the rest of a shuffle window after a reshard.

A resharded epoch (:mod:`._planner`) hands on the rest of an old rank's window in
progress in its permuted order: pieces a row or so long, jumping between the few
units of the window. Read one by one, each would read its unit again (a Parquet
row group is read whole): 500 pieces of a 10,000-row group took 0.45 s here. Read
as the hull of each unit's rows once, and put in order with one ``take``, they
cost one read per unit.
"""

from __future__ import annotations

from typing import Callable, Iterable, Iterator

import numpy as np
import pyarrow as pa

from ._sharding import Piece

# Pieces at most this many rows long, two or more in a row, are read together.
SHORT = 8


def scattered(read: Callable[[list[Piece]], Iterator[pa.Table]], pieces: list[Piece]) -> Iterator[pa.Table]:
    """The tables of ``pieces`` in order (``read``: a reader's ``tables``, which yields one
    table per piece; no filter, so none is empty), each run of short pieces read once per unit."""
    groups = list(_groups(pieces))
    tables = read([piece for reads, _ in groups for piece in reads])
    for reads, order in groups:
        got = [next(tables) for _ in reads]
        yield got[0] if order is None else pa.concat_tables(got).take(pa.array(order))


def _groups(pieces: list[Piece]) -> Iterable[tuple[list[Piece], np.ndarray | None]]:
    """``(pieces to read, rows to take from their tables joined)``; ``None``: one piece, as it is."""
    start = 0
    while start < len(pieces):
        stop = start
        while stop < len(pieces) and pieces[stop].stop - pieces[stop].start <= SHORT:
            stop += 1
        if stop - start < 2:
            yield [pieces[start]], None
            start += 1
            continue
        yield _hulls(pieces[start:stop])
        start = stop


def _hulls(run: list[Piece]) -> tuple[list[Piece], np.ndarray]:
    """One piece per unit of ``run`` covering its rows there, and where each row of ``run`` is
    among the hulls' rows joined in that order."""
    hulls: dict[int, list[int]] = {}
    for piece in run:
        low, high = hulls.setdefault(piece.unit, [piece.start, piece.stop])
        hulls[piece.unit] = [min(low, piece.start), max(high, piece.stop)]
    first: dict[int, int] = {}
    offset = 0
    for unit, (low, high) in hulls.items():
        first[unit], offset = offset - low, offset + high - low
    order = np.concatenate([np.arange(p.start, p.stop) + first[p.unit] for p in run])
    return [Piece(unit, low, high) for unit, (low, high) in hulls.items()], order
