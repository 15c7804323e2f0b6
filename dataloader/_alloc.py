"""Where collated batches are allocated.

The collator asks this module for its output arrays instead of calling
``np.empty`` itself. In the main process that is plain ``np.empty``; inside a
worker the transport installs an allocator that carves the arrays out of a
shared-memory segment, so a batch is written once, straight into the memory
the main process will read (no private copy, no fresh pages per batch).
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Callable, Iterator

import numpy as np

Allocator = Callable[[tuple, np.dtype], np.ndarray]

_current: ContextVar[Allocator | None] = ContextVar("dataloader_batch_allocator", default=None)


def empty(shape: tuple, dtype: np.dtype) -> np.ndarray:
    """An uninitialised C-contiguous array from the active allocator."""
    allocate = _current.get()
    if allocate is None:
        return np.empty(shape, dtype)
    return allocate(tuple(shape), np.dtype(dtype))


def adopt(array: np.ndarray) -> np.ndarray:
    """``array`` itself where no allocator is active, else a copy of it from the allocator
    (for a batch made in a fresh array by a bulk NumPy call)."""
    if _current.get() is None:
        return array
    out = _current.get()(array.shape, array.dtype)
    out[...] = array
    return out


@contextmanager
def use_allocator(allocate: Allocator) -> Iterator[None]:
    """Route :func:`empty` to ``allocate`` inside the ``with`` block (this thread/context only)."""
    token = _current.set(allocate)
    try:
        yield
    finally:
        _current.reset(token)
