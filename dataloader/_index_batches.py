"""An epoch's indices cut into batches of Python ints: one ``tolist()`` per chunk of indices,
never one call per index."""

from __future__ import annotations

from typing import Iterator

import numpy as np

# Indices turned into Python ints per `.tolist()` call: large enough that NumPy does the work,
# small enough that the ints are still in the CPU's cache when the dataset reads them (1-3 us
# a batch of 256 faster than 65,536 at once, measured on Python scalars).
_CHUNK = 1 << 12


def stop(indices: np.ndarray, batch_size: int, drop_last: bool) -> int:
    """Where the epoch's batches end: before a last short batch if ``drop_last``."""
    return len(indices) - len(indices) % batch_size if drop_last else len(indices)


def to_lists(indices: np.ndarray, batch_size: int, drop_last: bool) -> Iterator[list[int]]:
    """Yield ``indices`` as lists of ``batch_size`` Python ints, one ``tolist()`` per chunk."""
    end = stop(indices, batch_size, drop_last)
    chunk = batch_size * max(1, _CHUNK // batch_size)
    for start in range(0, end, chunk):
        flat = indices[start : min(start + chunk, end)].tolist()
        for i in range(0, len(flat), batch_size):
            yield flat[i : i + batch_size]


def split_at(flat: np.ndarray, offsets: np.ndarray) -> Iterator[list[int]]:
    """Batches of any sizes (batch ``i`` is ``flat[offsets[i]:offsets[i + 1]]``) as lists of Python
    ints, one ``tolist()`` per chunk of about ``_CHUNK``: :class:`~dataloader.BucketSampler`'s."""
    count = len(offsets) - 1
    first = 0
    while first < count:
        last = int(np.searchsorted(offsets, offsets[first] + _CHUNK, side="right")) - 1
        last = min(max(last, first + 1), count)
        base = int(offsets[first])
        ints = flat[base : int(offsets[last])].tolist()
        edges = (offsets[first : last + 1] - base).tolist()
        for i in range(last - first):
            yield ints[edges[i] : edges[i + 1]]
        first = last
