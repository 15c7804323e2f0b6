"""What an epoch of a map sampler has left when a run resumes on another number of ranks.

A map sampler's epoch is one global list of *units* (indices for the plain samplers, whole
batches for :class:`~dataloader.BucketSampler`), padded by wrap-around to ``per_rank *
world_size`` positions; rank ``r`` takes positions ``r, r + world_size, ...``, and its batch
``k`` is its units ``[k * units_per_batch, (k + 1) * units_per_batch)``. So the batches every
old rank handed out name a set of positions, and the units at none of them are what the epoch
has left, in the order of the global list. A new world shares those out as a fresh epoch
would (its own padding), and a resume that changes the world again does the same to what is
left then: a :class:`Reshard` per change, replayed in order, rebuilds any of them.

Pure NumPy on counts, no state: every rank of the new world computes the same answer from
the same saved states.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from .errors import ArgumentValueError


@dataclass(frozen=True)
class Handed:
    """What one rank handed out of its share of an epoch: its batches ``[0, low)`` and those in
    ``extra`` (above ``low``: ``in_order=False``; or half echoed: ``repeats``)."""

    low: int
    extra: tuple[int, ...] = ()

    def batches(self) -> int:
        return self.low + len(self.extra)


@dataclass(frozen=True)
class Reshard:
    """One change of world inside an epoch: the old world, its batch size in units and what
    each of its ranks handed out (one entry standing for every rank when they agree)."""

    world_size: int
    units_per_batch: int
    handed: tuple[Handed, ...]

    def of_rank(self, rank: int) -> Handed:
        return self.handed[0] if len(self.handed) == 1 else self.handed[rank]

    def to_plain(self) -> dict[str, Any]:
        """As plain values, for a sampler's state."""
        return {
            "world_size": self.world_size,
            "units_per_batch": self.units_per_batch,
            "handed": [[h.low, list(h.extra)] for h in self.handed],
        }

    @classmethod
    def from_plain(cls, plain: Any) -> Reshard:
        """The inverse of :meth:`to_plain`; an edited or corrupted entry is a clear error."""
        try:
            world_size, per_batch = int(plain["world_size"]), int(plain["units_per_batch"])
            handed = tuple(Handed(int(low), tuple(int(k) for k in extra)) for low, extra in plain["handed"])
        except (KeyError, TypeError, ValueError):
            raise ArgumentValueError(
                f"the sampler state's reshards entry {plain!r} is not what a resume on another "
                "number of ranks wrote: load the state as DataLoader.state_dict() returned it."
            ) from None
        if world_size < 1 or per_batch < 1 or len(handed) not in (1, world_size) or any(
            h.low < 0 or any(k < h.low for k in h.extra) for h in handed
        ):
            raise ArgumentValueError(
                f"the sampler state's reshards entry {plain!r} does not fit together (a world of "
                f"{world_size} needs 1 or {world_size} entries of [low, batches above low]): load "
                "the state as DataLoader.state_dict() returned it."
            )
        return cls(world_size, per_batch, handed)


def per_rank(units: int, world_size: int) -> int:
    """Positions each rank takes of ``units`` units padded by wrap-around."""
    return -(-units // world_size)


def left_after(units: int, reshard: Reshard) -> np.ndarray:
    """The positions, into a list of ``units`` units, that no rank of ``reshard``'s world handed
    out (a unit handed out as another position's padding copy counts as handed out), in order."""
    world, size = reshard.world_size, reshard.units_per_batch
    share = per_rank(units, world)
    handed = np.zeros(units, dtype=bool)
    if units == 0:
        return np.flatnonzero(handed)
    # Every rank's first `common` local positions together are the global prefix [0, world * common):
    # one slice for ranks in step (the usual case), and only what a rank did beyond it, rank by rank.
    firsts = [min(reshard.of_rank(rank).low * size, share) for rank in range(world)]
    common = min(firsts)
    handed[: min(world * common, units)] = True
    for rank, first in enumerate(firsts):
        done = reshard.of_rank(rank)
        locals_ = [np.arange(common, first, dtype=np.int64)]
        locals_ += [np.arange(k * size, min((k + 1) * size, share), dtype=np.int64) for k in done.extra]
        local = np.concatenate(locals_)
        if len(local):
            handed[(rank + world * local) % units] = True
    return np.flatnonzero(~handed)


def handed_of(states: Sequence[dict[str, Any]]) -> tuple[Handed, ...]:
    """Each saved position's batches handed out (``low``, ``above``, the half-echoed ones in
    ``partial``): one entry per state, or one for all when a single state speaks for every rank."""
    return tuple(
        Handed(int(s["low"]), tuple(sorted({*map(int, s["above"]), *(int(p[0]) for p in s["partial"])})))
        for s in states
    )
