"""Which source each item of a mix comes from: the draws, a block of uniforms at a time.

Draw ``k`` of one process uses uniform ``k % BLOCK`` of block ``k // BLOCK``, and each block
has a generator of its own, seeded by ``(seed, epoch, rank, worker, block)``. So a resume at
any draw makes one block again rather than every draw before it, and turning uniforms into
source numbers is one vectorised NumPy call per block, not a call per item.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

BLOCK = 1024  # uniforms made at once: small enough to remake on a resume, large enough to be cheap
MIX_STREAM = 0x6D6978  # keeps the mixer's draws apart from every other user of the same seed


class Draws:
    """The source of each draw of one ``(seed, epoch, rank, worker)``, from draw ``position`` on.

    A uniform picks among the sources still drawn from in proportion to their weights. The
    reader counts ``position`` up as it uses a draw; when a source runs out, it asks
    :meth:`choices` again, which picks the draws left in the block anew among the others,
    from the same uniforms: the same state always gives the same choices.
    """

    def __init__(self, key: tuple[int, ...], weights: npt.NDArray[np.float64], position: int = 0) -> None:
        self._key = key
        self._weights = weights
        self.position = position
        self._block = -1
        self._uniforms: npt.NDArray[np.float64] = np.empty(0)

    def choices(self, active: npt.NDArray[np.bool_]) -> list[int]:
        """The source numbers of the draws from ``position`` to the end of its block, drawn among
        the sources ``active`` marks (a boolean per source; at least one with a weight)."""
        block, offset = divmod(self.position, BLOCK)
        if block != self._block:
            self._uniforms = np.random.default_rng([*self._key, MIX_STREAM, block]).random(BLOCK)
            self._block = block
        weights = np.where(active, self._weights, 0.0)
        # Scaled by the largest: weights as given may each be finite while their sum is not
        # (1e308 twice), and a cumulative sum of inf would give every draw to one source.
        weights /= weights.max()
        bounds = np.cumsum(weights)
        # side="right": a source of weight 0 (an empty interval) is never picked
        picked = np.searchsorted(bounds, self._uniforms[offset:] * bounds[-1], side="right")
        last = int(np.flatnonzero(weights)[-1])  # rounding can reach past it; it owns the top
        chosen: list[int] = np.minimum(picked, last).tolist()
        return chosen
