"""Which rows each shard reads: an epoch's order of units, cut between ranks and workers.

Pure logic on row counts taken from file metadata, so every process on every
rank computes the same plan without talking to the others.

An epoch is one sequence of rows: the rows carried over from the previous
epoch (``equal=True, surplus="carry"``), then every unit (a Parquet row group,
an Arrow record batch) in file order or, with ``shuffle``, in a permutation
seeded by ``(seed, epoch)``. The sequence is cut into batches of
``batch_size`` rows (1 in row mode). Rank ``r`` takes a contiguous block of
those batches, and worker ``w`` of a rank a contiguous block of the rank's
batches. A shard is thus a row range of the sequence; it may start or end
inside a unit, which the two neighbours then both read, each keeping its rows.

- Every row of the sequence goes to exactly one shard.
- Blocks differ by at most one batch, so no shard is empty while the epoch
  has at least ``world_size * workers`` batches (ranks may run different
  numbers of workers: each rank's rows are the same whatever its workers).
- Without ``equal`` the batches are those one process reading the whole
  sequence would make, for any world size and number of workers; only the
  epoch's last batch may be short.
- With ``equal`` every rank takes ``(rows // batch_size) // world_size`` full
  batches. The rows after the last rank's block are the surplus: dropped, or
  carried to the front of the next epoch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

# Streams drawn from (seed, epoch, ...): one per purpose, so they never coincide.
ORDER_STREAM = 0
BUFFER_STREAM = 1

NO_PIECES = np.zeros((0, 3), dtype=np.int64)


class Piece(NamedTuple):
    """Rows ``[start, stop)`` of unit ``unit`` (positions inside the unit)."""

    unit: int
    start: int
    stop: int


@dataclass(frozen=True)
class Layout:
    """What decides every epoch's plan; equal in every process that reads the same files."""

    counts: tuple[int, ...]  # rows in each unit, in file order
    world_size: int = 1
    batch_size: int = 1  # 1 in row mode: shards are then cut between rows
    shuffle: bool = False
    seed: int = 0
    equal: bool = False
    carry: bool = False  # equal=True only: the surplus starts the next epoch
    shuffle_buffer: int = 0  # rows per shuffled window of a shard (a reshard needs it: see ._planner)


@dataclass(frozen=True)
class EpochPlan:
    """One epoch's sequence of pieces and where each rank's rows begin and end."""

    epoch: int
    sequence: np.ndarray  # (pieces, 3): unit, start, stop
    offsets: np.ndarray  # offsets[i]: rows of the sequence before piece i; offsets[-1]: all
    world_size: int
    batch_size: int
    equal: bool
    carried_in: int  # rows at the front that the previous epoch carried over
    surplus: np.ndarray = field(default_factory=lambda: NO_PIECES)  # rows after bound(world_size)
    generation: int = 0  # reshards this epoch's plan went through (see ._planner): keys its shuffle windows

    @property
    def rows(self) -> int:
        return int(self.offsets[-1])

    def bound(self, rank: int) -> int:
        """Where rank ``rank``'s rows begin in the sequence (``bound(world_size)``: where the
        last rank's end). Computed for one rank, so a plan costs nothing per rank."""
        return _bound(self.rows, self.batch_size, self.world_size, self.equal, rank)

    @property
    def surplus_rows(self) -> int:
        return pieces_rows(self.surplus)

    def cut(self, lo: int, hi: int) -> np.ndarray:
        """Rows ``[lo, hi)`` of the sequence as an array of pieces (unit, start, stop), none empty."""
        return cut_pieces(self.sequence, self.offsets, lo, hi)

    def pieces(self, lo: int, hi: int) -> list[Piece]:
        """Rows ``[lo, hi)`` of the sequence as pieces of units, in order, none empty."""
        return [Piece(*map(int, row)) for row in self.cut(lo, hi)]


def unit_order(units: int, shuffle: bool, seed: int, epoch: int) -> np.ndarray:
    """The order units are read in: file order, or a permutation seeded by ``(seed, epoch)``."""
    if not shuffle:
        return np.arange(units, dtype=np.int64)
    return np.random.default_rng([seed, epoch, ORDER_STREAM]).permutation(units).astype(np.int64)


def window_rng(seed: int, epoch: int, rank: int, worker: int, window: int, generation: int = 0) -> np.random.Generator:
    """What permutes window ``window`` of a shard's shuffle buffer; a resharded epoch's windows
    (``generation`` > 0) draw from streams of their own."""
    key = [seed, epoch, BUFFER_STREAM, rank, worker, window]
    return np.random.default_rng(key + [generation] if generation else key)


def plan_epoch(layout: Layout, epoch: int, carried: np.ndarray = NO_PIECES) -> EpochPlan:
    """The plan of ``epoch``, whose sequence starts with the ``carried`` pieces."""
    counts = np.asarray(layout.counts, dtype=np.int64)
    order = unit_order(len(counts), layout.shuffle, layout.seed, epoch)
    units = np.stack([order, np.zeros_like(order), counts[order]], axis=1)
    sequence = np.concatenate([carried, units]) if len(carried) else units
    return planned(epoch, sequence, layout.world_size, layout, pieces_rows(carried))


def planned(
    epoch: int, sequence: np.ndarray, world_size: int, layout: Layout, carried_in: int,
    surplus_before: np.ndarray = NO_PIECES, generation: int = 0,
) -> EpochPlan:
    """The plan that cuts ``sequence`` between ``world_size`` ranks; its surplus is
    ``surplus_before`` (a reshard's: the old world's) and then the rows after the last block."""
    offsets = np.concatenate([[0], np.cumsum(sequence[:, 2] - sequence[:, 1])]).astype(np.int64)
    total, size = int(offsets[-1]), layout.batch_size
    surplus = cut_pieces(sequence, offsets, _bound(total, size, world_size, layout.equal, world_size), total)
    if len(surplus_before):
        surplus = np.concatenate([surplus_before, surplus])
    return EpochPlan(epoch, sequence, offsets, world_size, size, layout.equal, carried_in, surplus, generation)


def pieces_rows(pieces: np.ndarray) -> int:
    """The rows an array of pieces holds."""
    return int(np.sum(pieces[:, 2] - pieces[:, 1])) if len(pieces) else 0


def _bound(total: int, size: int, ranks: int, equal: bool, rank: int) -> int:
    """The first row of rank ``rank``'s block (see the module): with ``equal`` every rank takes
    the same whole number of batches, otherwise rank r starts at batch ``r * batches // ranks``."""
    if equal:
        return rank * ((total // size) // ranks * size)
    batches = -(-total // size)
    return min(total, rank * batches // ranks * size)


def shard_range(plan: EpochPlan, batch_size: int, rank: int, worker: int, workers: int) -> tuple[int, int]:
    """The rows ``[lo, hi)`` of the sequence that worker ``worker`` of ``workers`` on ``rank`` reads."""
    lo, hi = plan.bound(rank), plan.bound(rank + 1)
    batches = -(-(hi - lo) // batch_size)
    first, last = worker * batches // workers, (worker + 1) * batches // workers
    return min(hi, lo + first * batch_size), min(hi, lo + last * batch_size)


def cut_pieces(sequence: np.ndarray, offsets: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """The pieces holding rows ``[lo, hi)`` of ``sequence``, trimmed to them, none empty."""
    if hi <= lo:
        return NO_PIECES
    first = int(np.searchsorted(offsets, lo, side="right")) - 1
    end = int(np.searchsorted(offsets, hi, side="left"))
    cut = sequence[first:end].copy()
    cut[0, 1] += lo - offsets[first]
    cut[-1, 2] -= offsets[end] - hi
    return cut[cut[:, 2] > cut[:, 1]]
