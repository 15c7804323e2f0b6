"""Where each piece of a window goes: first fit, best fit decreasing and the concat cuts, as
pure functions of lengths. Each returns a :class:`Placement`: per piece, where its tokens start
in the window's tokens (``source``), how many (``length``), its row and its offset in the row."""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Ints = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Placement:
    """The pieces of a window (in no particular order) and the rows they fill."""

    source: Ints  # start of each piece in the window's tokens (samples concatenated in order)
    length: Ints  # tokens of each piece, 1 .. seq_len
    row: Ints  # the row each piece goes in, 0 .. rows - 1 (rows in creation order)
    offset: Ints  # where the piece starts in its row
    rows: int


def pieces(lengths: Ints, seq_len: int) -> tuple[Ints, Ints, npt.NDArray[np.bool_]]:
    """Samples of ``lengths`` (each > 0) cut into pieces of at most ``seq_len``: a longer sample
    gives its first ``seq_len`` tokens, its next ``seq_len``, ..., then the rest. Returns per piece
    its start in the samples' concatenation, its length, and whether it continues a sample."""
    counts = -(-lengths // seq_len)  # ceil
    starts = np.cumsum(lengths) - lengths
    first = np.cumsum(counts) - counts
    within = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(first, counts)
    taken = within * seq_len
    length = np.minimum(seq_len, np.repeat(lengths, counts) - taken)
    return np.repeat(starts, counts) + taken, length, within > 0


def first_fit(lengths: Ints, seq_len: int, follows: npt.NDArray[np.bool_]) -> tuple[Ints, Ints, int]:
    """Pieces in their order, each into the first row (in creation order) with room for it, else a
    new row. A piece that ``follows`` a piece of its own sample takes a new row, so a sample's
    pieces come in order in the rows. Returns each piece's row and offset, and the row count."""
    count = len(lengths)
    free = np.zeros(count, dtype=np.int64)  # room left in each row made so far
    row = np.empty(count, dtype=np.int64)
    offset = np.empty(count, dtype=np.int64)
    made = 0
    for number, (size, fresh) in enumerate(zip(lengths.tolist(), follows.tolist())):
        found = made
        if size < seq_len and not fresh and made:
            fits = free[:made] >= size
            first = int(fits.argmax())
            found = first if fits[first] else made
        if found == made:
            free[made] = seq_len
            made += 1
        row[number], offset[number] = found, seq_len - free[found]
        free[found] -= size
    return row, offset, made


def best_fit_decreasing(lengths: Ints, seq_len: int, first: int = 0) -> tuple[Ints, Ints, int]:
    """Pieces longest first (stable), each into the row with the least room that still holds it
    (the first made among equals), else a new row: a sorted list of (room, row) and a bisection
    per piece. A sample's full pieces come before its rest, so its pieces come in order in the
    rows. The first ``first`` pieces (those a held-back row brought) go together into one row,
    before the others and made last, so that a sample's rest placed beside them still comes after
    its full pieces. Returns each piece's row and offset, and the row count."""
    count = len(lengths)
    row = np.empty(count, dtype=np.int64)
    offset = np.empty(count, dtype=np.int64)
    rooms: list[tuple[int, int]] = []  # (room, row) of the rows not full, sorted
    made = 0
    if first:  # the pieces a row held back brought: together in row 0, as they were
        row[:first] = 0
        offset[:first] = np.cumsum(lengths[:first]) - lengths[:first]
        made, room = 1, seq_len - int(lengths[:first].sum())
        if room:
            rooms.append((room, 0))
    rest = np.argsort(-lengths[first:], kind="stable") + first
    for number, size in zip(rest.tolist(), lengths[rest].tolist()):
        at = bisect.bisect_left(rooms, (size, -1))
        if at == len(rooms):
            found, room = made, seq_len
            made += 1
        else:
            room, found = rooms.pop(at)
        row[number], offset[number] = found, seq_len - room
        if room > size:
            bisect.insort(rooms, (room - size, found))
    if first and made > 1:  # the held-back row last: a split sample's rest never precedes its full pieces
        row = np.where(row == 0, made - 1, row - 1)
    return row, offset, made


def concat_cuts(lengths: Ints, seq_len: int, final: bool) -> tuple[Placement, int]:
    """Samples of ``lengths`` concatenated and cut into rows of ``seq_len``: a sample that crosses
    a row's end goes on at the start of the next row, as a piece of its own. Only full rows are
    made, except where ``final`` (the source has ended): then the rest is one padded row. Returns
    the placement and how many tokens it uses (the rest is the carry into the next window)."""
    total = int(lengths.sum())
    rows = total // seq_len + (1 if final and total % seq_len else 0)
    used = min(total, rows * seq_len)
    starts = (np.cumsum(lengths) - lengths)[lengths > 0]
    cuts = np.arange(0, used, seq_len, dtype=np.int64)
    source = np.union1d(starts[starts < used], cuts).astype(np.int64)
    length = np.diff(np.append(source, used))
    row = source // seq_len
    return Placement(source, length, row, source - row * seq_len, rows), used
