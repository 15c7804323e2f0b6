"""A process's share of a map dataset, telling a map dataset from a stream, opening a stream
where a reader left it, and a source's fingerprint: what every reader that wraps sources needs
(:mod:`dataloader.mixing`, :mod:`dataloader.packing`)."""

from __future__ import annotations

import collections
import itertools
import threading
from typing import Any, Iterator

from ._digest import qualified_name
from ._local import in_thread_worker
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


def share(length: int, world_size: int, rank: int, worker: int, workers: int) -> tuple[int, int]:
    """``[lo, hi)`` of the indices of a map dataset of ``length`` that worker ``worker`` of
    ``workers`` on rank ``rank`` of ``world_size`` reads: a block per rank, cut into one per worker."""
    lo, hi = block(length, world_size, rank)
    start, stop = block(hi - lo, workers, worker)
    return lo + start, lo + stop


def keeps_state(source: Any) -> bool:
    """Whether ``source`` is a stream with a ``state_dict()`` and ``load_state_dict()`` of its own."""
    return not is_map(source) and all(
        callable(getattr(source, method, None)) for method in ("state_dict", "load_state_dict")
    )


def open_stream(source: Any, epoch: int, state: Any = None, skip: int = 0) -> Iterator[Any]:
    """Stream ``source``'s items of ``epoch``: from ``state`` (its own ``state_dict()``) when
    given, else from the start with the first ``skip`` dropped (iter() is called once: a stream
    that is its own iterator may start over on a second call).

    In a thread worker the source may be shared with the other worker threads (a mix's or a
    packer's source: each worker has its own copy of the mix, not of what it wraps), so telling
    it the epoch and opening it is one step under that source's own lock, as far as the first
    item: otherwise another thread's ``set_epoch`` may land between this thread's and its
    ``iter()`` (or the first lines of a generator ``__iter__``, which run at the first
    ``next()``). One lock per source, not one for all: threads opening other sources (another
    loader's, read inside this source's first item) go on."""
    if not in_thread_worker():
        return _opened(source, epoch, state, skip)
    with _opening_lock(source):
        items = _opened(source, epoch, state, skip)
        first = next(items, _END)
    return iter(()) if first is _END else itertools.chain((first,), items)


# Reentrant: a mix may hold one source twice. Keyed by id(): a source need not be hashable or
# weakly referable; an id reused by a later object shares a lock, which only serialises more.
_OPENING: dict[int, threading.RLock] = {}
_OPENING_GUARD = threading.Lock()
_END = object()


def _opening_lock(source: Any) -> threading.RLock:
    with _OPENING_GUARD:
        lock = _OPENING.get(id(source))
        if lock is None:
            lock = _OPENING[id(source)] = threading.RLock()
        return lock


def _opened(source: Any, epoch: int, state: Any, skip: int) -> Iterator[Any]:
    set_epoch = getattr(source, "set_epoch", None)
    if set_epoch is not None:
        set_epoch(epoch)
    if state is not None:
        source.load_state_dict(state)
        resumed: Iterator[Any] = iter(source)
        return resumed
    items: Iterator[Any] = iter(source)
    if skip:
        collections.deque(itertools.islice(items, skip), maxlen=0)
    return items


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
