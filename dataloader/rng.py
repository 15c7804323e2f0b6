"""The random generator of the batch being made: :func:`batch_rng`.

Transforms that draw random parameters should draw them from ``batch_rng()``
rather than from global state or ``self``: inside a loader it is a
``numpy.random.Generator`` seeded from (loader seed, epoch, batch index) for
the calling thread only, so augmentations are the same for any
``num_workers`` and worker type, and thread workers never share a stream.
:func:`draw_seed` is where a loader or sampler built without a seed gets one.
"""

from __future__ import annotations

import sys

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



def draw_seed() -> int:
    """A seed for a loader or sampler built without one, in ``[0, 2**63)``: from torch's generator
    where the program imported torch (so ``torch.manual_seed`` fixes it, as in PyTorch), else from
    ``numpy.random``'s global state (so ``np.random.seed`` does)."""
    torch = sys.modules.get("torch")
    if torch is not None:
        return int(torch.empty((), dtype=torch.int64).random_().item())
    return int(np.random.randint(0, 2**63 - 1, dtype=np.int64))
