"""A process's share of a map dataset, and telling a map dataset from a stream: what every
reader that wraps sources needs (:mod:`dataloader.mixing`, :mod:`dataloader.packing`)."""

from __future__ import annotations

from typing import Any

from .dataset import StreamDataset


def is_map(source: Any) -> bool:
    """True for a map dataset (``__getitem__`` and ``__len__``, not a stream), False for a stream."""
    if isinstance(source, StreamDataset):
        return False
    return hasattr(source, "__getitem__") and hasattr(source, "__len__")


def block(length: int, parts: int, part: int) -> tuple[int, int]:
    """``[lo, hi)`` of part ``part`` when ``length`` items are cut into ``parts`` contiguous
    blocks whose sizes differ by at most one (the first ones the larger)."""
    size, extra = divmod(length, parts)
    lo = part * size + min(part, extra)
    return lo, lo + size + (part < extra)
