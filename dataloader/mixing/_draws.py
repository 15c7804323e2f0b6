"""Which source each item of a mix comes from: the draws, a block of uniforms at a time.

Draw ``k`` of one process uses uniform ``k % BLOCK`` of block ``k // BLOCK``, and each block
has a generator of its own, seeded by ``(seed, epoch, rank, worker, block)``. So a resume at
any draw makes one block again rather than every draw before it, and turning uniforms into
source numbers is one vectorised NumPy call per block, not a call per item. Where the weights
change (:mod:`._schedule`), the block is cut there: the uniforms stay, the weights that turn
them into sources change exactly at the change point.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ._schedule import Weights

BLOCK = 1024  # uniforms made at once: small enough to remake on a resume, large enough to be cheap
MIX_STREAM = 0x6D6978  # keeps the mixer's draws apart from every other user of the same seed
RESHARD = 0x726573  # marks the key of a rank's draws after a resume on another world size


class Draws:
    """The source of each draw of one ``(seed, epoch, rank, worker)``, from draw ``position`` on.

    A uniform picks among the sources still drawn from in proportion to the weights in force at
    its count of items drawn (``base``, the count when the epoch began, plus ``position``). The
    reader counts ``position`` up as it uses a draw; when a source runs out, it asks
    :meth:`choices` again, which picks the draws left in the block anew among the others,
    from the same uniforms: the same state always gives the same choices.
    """

    def __init__(self, key: tuple[int, ...], weights: Weights, position: int = 0, base: int = 0) -> None:
        self._key = key
        self.weights = weights
        self.position = position
        self.base = base
        self._block = -1
        self._uniforms: npt.NDArray[np.float64] = np.empty(0)

    @property
    def drawn(self) -> int:
        """Items drawn since the run began: what a weight schedule is a function of."""
        return self.base + self.position

    def choices(self, active: npt.NDArray[np.bool_]) -> list[int]:
        """The source numbers of the draws from ``position`` to the end of its block or to the
        next change of weights, drawn among the sources ``active`` marks (a boolean per source);
        empty where none of those has a weight now."""
        block, offset = divmod(self.position, BLOCK)
        if block != self._block:
            self._uniforms = np.random.default_rng([*self._key, MIX_STREAM, block]).random(BLOCK)
            self._block = block
        now, following = self.weights.at(self.drawn)
        end = BLOCK if following is None else min(BLOCK, offset + following - self.drawn)
        weights = np.where(active, now, 0.0)
        top = weights.max()
        if not top > 0:
            return []
        # Scaled by the largest: weights as given may each be finite while their sum is not
        # (1e308 twice), and a cumulative sum of inf would give every draw to one source.
        weights /= top
        bounds = np.cumsum(weights)
        # side="right": a source of weight 0 (an empty interval) is never picked
        picked = np.searchsorted(bounds, self._uniforms[offset:end] * bounds[-1], side="right")
        last = int(np.flatnonzero(weights)[-1])  # rounding can reach past it; it owns the top
        chosen: list[int] = np.minimum(picked, last).tolist()
        return chosen
