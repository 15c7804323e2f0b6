"""Random state as a function of (seed, epoch, batch index), not of the worker.

That is what makes a seeded loader give the same batches for any
``num_workers``: whichever process makes batch k seeds ``random``,
``numpy.random`` and (if already imported) torch the same way first.
"""

from __future__ import annotations

import random
import sys
from contextlib import contextmanager
from typing import Iterator

import numpy as np


def batch_seed(seed: int, epoch: int, index: int) -> int:
    """A 63-bit seed for batch ``index`` of ``epoch``."""
    state = np.random.SeedSequence([seed, epoch, index]).generate_state(2, dtype=np.uint32)
    return (int(state[0]) << 31) ^ int(state[1])


def seed_all(seed: int) -> None:
    """Seed ``random``, ``numpy.random`` and torch (only if the program imported it)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(seed)


@contextmanager
def seeded_then_restored(seed: int) -> Iterator[None]:
    """Seed everything for one batch, then put the caller's random state back.

    Used in the main process, where the user's own random streams must not
    be disturbed by the loader's per-batch seeding.
    """
    py_state = random.getstate()
    np_state = np.random.get_state()
    torch = sys.modules.get("torch")
    torch_state = torch.random.get_rng_state() if torch is not None else None
    seed_all(seed)
    try:
        yield
    finally:
        random.setstate(py_state)
        np.random.set_state(np_state)
        if torch_state is not None:
            torch.random.set_rng_state(torch_state)
