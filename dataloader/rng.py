"""The random generator of the batch being made: :func:`batch_rng`.

Transforms that draw random parameters should draw them from ``batch_rng()``
rather than from global state or ``self``: inside a loader it is a
``numpy.random.Generator`` seeded from (loader seed, epoch, batch index) for
the calling thread only, so augmentations are the same for any
``num_workers`` and worker type, and thread workers never share a stream.
"""

from __future__ import annotations

import numpy as np

from ._local import current_batch_rng


def batch_rng() -> np.random.Generator:
    """The current batch's generator; outside a loader, one drawn from ``numpy.random``'s state.

    Outside a loader each call returns a new generator seeded from the global
    ``numpy.random`` state, so ``np.random.seed(n)`` makes direct calls to a
    transform reproducible too.
    """
    rng = current_batch_rng()
    if rng is not None:
        return rng
    return np.random.default_rng(np.random.randint(0, 2**32, size=4, dtype=np.uint64))

