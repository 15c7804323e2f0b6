"""A process's share of a map dataset, telling a map dataset from a stream, and a source's
fingerprint: what every reader that wraps sources needs (:mod:`dataloader.mixing`,
:mod:`dataloader.packing`)."""

from __future__ import annotations

from typing import Any

from ._digest import qualified_name
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


def source_fingerprint(source: Any) -> Any:
    """What decides a source's items and their order, as plain values: its own
    ``order_fingerprint()``, else its class (and a map dataset's length)."""
    own = getattr(source, "order_fingerprint", None)
    if callable(own):
        return own()
    found: dict[str, Any] = {"type": qualified_name(source)}
    if is_map(source):
        found["length"] = len(source)
    return found


def kind_name(value: Any) -> str:
    """How an error names what it got: ``the class X`` for a class, else the type's name."""
    return f"the class {value.__name__}" if isinstance(value, type) else type(value).__name__
