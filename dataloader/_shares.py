"""A process's share of a map dataset, telling a map dataset from a stream, and a source's
fingerprint: what every reader that wraps sources needs (:mod:`dataloader.mixing`,
:mod:`dataloader.packing`)."""

from __future__ import annotations

from typing import Any

from ._digest import qualified_name
from .dataset import StreamDataset
from .errors import ArgumentTypeError


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


def _kind_name(value: Any) -> str:
    """How an error names what it got: ``the class X`` for a class, else the type's name."""
    return f"the class {value.__name__}" if isinstance(value, type) else type(value).__name__


def check_readable(who: str, source: Any, again: str) -> None:
    """Refuse a ``source`` that a wrapper (``who``: "MixedStream: source 'web'") cannot read
    once per epoch: neither a stream nor a map dataset, a class, or an iterator (read once;
    ``again`` says why the wrapper reads it again)."""
    if isinstance(source, type) or not (is_map(source) or hasattr(source, "__iter__")):
        raise ArgumentTypeError(
            f"{who} must be a stream (a StreamDataset, or an object with __iter__) or a map dataset "
            f"(with __getitem__ and __len__); got {_kind_name(source)}."
        )
    if hasattr(source, "__next__"):
        raise ArgumentTypeError(
            f"{who} is an iterator ({type(source).__name__}), which can be read only once; {again}. "
            "Give an object whose __iter__ starts a fresh pass (a StreamDataset), or a map dataset."
        )
