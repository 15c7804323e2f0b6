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


_MASK = (1 << 64) - 1
_STREAM = 0x5EED_57EA  # sets stream seeds apart from batch seeds


def _mix(value: int) -> int:
    """SplitMix64's finaliser: a cheap, well-spread 64-bit hash."""
    value = (value + 0x9E3779B97F4A7C15) & _MASK
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & _MASK
    return value ^ (value >> 31)


def batch_seed(seed: int, epoch: int, index: int) -> int:
    """A 63-bit seed for batch ``index`` of ``epoch`` (about a microsecond: it runs per batch)."""
    return _mix(_mix(_mix(seed) ^ epoch) ^ index) >> 1


def stream_seed(seed: int, epoch: int, index: int) -> int:
    """The seed a stream read by a worker draws with while batch ``index`` of ``epoch`` is read
    (apart from the seed that batch's transforms draw with)."""
    return batch_seed(seed ^ _STREAM, epoch, index)


def seed_all(seed: int) -> None:
    """Seed ``random``, ``numpy.random`` and torch (only if the program imported it)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch = sys.modules.get("torch")
    if torch is not None:
        # The CPU generator only: torch.manual_seed also queues seeding of every
        # accelerator backend, which costs ~100 us a call, per batch.
        torch.default_generator.manual_seed(seed)


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
