"""A batch -> small metadata plus its array bytes in a segment, and back.

Plain batches (containers of C-contiguous arrays) are described by a cached
:mod:`skeleton <dataloader._transport.skeleton>` and each array's shape. For
everything else, pickle protocol 5 hands every contiguous NumPy array and every Arrow buffer
to a callback instead of copying it into the pickle ("out-of-band"). The
worker puts those buffers in a shared segment (where the collator usually
wrote them already, so nothing is copied at all) and sends only the pickle
and the buffers' offsets. The main process unpickles with views of the
segment: the arrays it hands out *are* the shared memory.
"""

from __future__ import annotations

import itertools
import pickle
from dataclasses import dataclass
from typing import Any

import numpy as np

from .arena import BumpAllocator, NoSegment, Segment, SegmentPool
from .mapping import unsendable
from .segment import align
from .skeleton import Plain, SkeletonBook, SkeletonNames, as_bytes, flatten

# Below this many bytes of array data a batch travels inside the message: a
# segment round trip costs more than copying a few kilobytes.
INLINE_LIMIT = 64 * 1024


@dataclass(frozen=True)
class InlineBatch:
    """A batch whose buffers travel inside the message."""

    meta: bytes | Plain
    buffers: tuple[bytearray, ...]

    @property
    def nbytes(self) -> int:
        return sum(len(buffer) for buffer in self.buffers)


@dataclass(frozen=True)
class LocalBatch:
    """A batch made by a thread worker: the object itself, nothing copied or pickled."""

    value: Any
    nbytes = 0  # nothing is copied


@dataclass(frozen=True)
class SharedBatch:
    """A batch whose buffers lie in segment ``segment_id`` at ``layout`` (offset, nbytes)."""

    segment_id: int
    meta: bytes | Plain
    layout: tuple[tuple[int, int], ...]

    @property
    def nbytes(self) -> int:
        return sum(n for _, n in self.layout)


def split(batch: Any, names: SkeletonNames | None = None) -> tuple[bytes | Plain, list[memoryview]]:
    """The meta of ``batch`` and its buffers: a :class:`Plain` naming its skeleton in ``names``
    where it has one, else a pickle with its large buffers left out-of-band."""
    if names is not None:
        flat = flatten(batch)
        if flat is not None:
            skeleton, shapes, arrays = flat
            return names.plain(skeleton, shapes), [as_bytes(a) for a in arrays]
    buffers: list[pickle.PickleBuffer] = []
    meta = pickle.dumps(batch, protocol=5, buffer_callback=buffers.append)
    return meta, [b.raw() for b in buffers]


def _placed_size(raws: list[memoryview]) -> int:
    """Bytes ``raws`` take in a segment, each aligned."""
    return sum(align(raw.nbytes) for raw in raws)


def fits_inline(raws: list[memoryview]) -> bool:
    """Whether buffers this small travel inside the message when no segment holds them yet."""
    return _placed_size(raws) <= INLINE_LIMIT


def inline(meta: bytes | Plain, raws: list[memoryview]) -> InlineBatch:
    """Carry the buffers in the message (writable copies, as users expect)."""
    try:
        return InlineBatch(meta, tuple(bytearray(raw) for raw in raws))
    except MemoryError as error:  # under ulimit -v, where the segment could not be mapped either
        limited = unsendable(sum(raw.nbytes for raw in raws))
        if limited is None:
            raise
        raise limited from error


def pack(
    meta: bytes | Plain, raws: list[memoryview], pool: SegmentPool, allocator: BumpAllocator | None
) -> InlineBatch | SharedBatch | None:
    """Place the buffers in a segment; None when the pool has no room (wait, then retry).

    Buffers the collator already wrote into the allocator's segment stay
    where they are; the rest are copied behind them, or everything moves to
    a bigger segment when they do not fit. With no descriptor or address space
    left for a new segment the batch travels inline.
    """
    current = allocator.segment if allocator is not None else None
    if not raws:
        _give_back(pool, current)
        return InlineBatch(meta, ())
    total = _placed_size(raws)
    if current is None and total <= INLINE_LIMIT:
        return inline(meta, raws)
    if current is not None:
        layout = _place_after(current, allocator.used, raws)
        if layout is not None:
            return SharedBatch(current.id, meta, layout)
    try:
        fresh = pool.acquire(total)
    except NoSegment:  # no descriptor or address space for a new segment: send it inline
        _give_back(pool, current)
        return inline(meta, raws)
    if fresh is None:
        return None
    layout = _place_after(fresh, 0, raws, reuse=False)
    _give_back(pool, current)
    return SharedBatch(fresh.id, meta, layout)


def _place_after(
    segment: Segment, used: int, raws: list[memoryview], reuse: bool = True
) -> tuple[tuple[int, int], ...] | None:
    offsets = [segment.offset_of(raw) if reuse else None for raw in raws]
    reused = [offset is not None for offset in offsets]
    end = used
    for i, raw in enumerate(raws):
        if offsets[i] is None:
            offsets[i] = align(end)
            end = offsets[i] + raw.nbytes
    if end > segment.capacity:
        return None
    segment.back(end)
    for raw, offset, in_place in zip(raws, offsets, reused):
        if not in_place and raw.nbytes:
            target = np.frombuffer(segment.buffer, np.uint8, count=raw.nbytes, offset=offset)
            target[:] = np.frombuffer(raw, np.uint8)
    return tuple((offset, raw.nbytes) for offset, raw in zip(offsets, raws))


def _give_back(pool: SegmentPool, segment: Segment | None) -> None:
    if segment is not None:
        pool.give_back(segment)


def decode_inline(batch: InlineBatch, book: SkeletonBook | None = None) -> Any:
    """The batch of an :class:`InlineBatch`; ``book`` holds the sending worker's skeletons
    (needed only if it was split with skeleton names)."""
    if isinstance(batch.meta, Plain):
        return book.decode(batch.meta, batch.buffers, itertools.repeat(0))
    return pickle.loads(batch.meta, buffers=batch.buffers)


def decode_shared(batch: SharedBatch, segment_view: np.ndarray, book: SkeletonBook | None = None) -> Any:
    """The batch of a :class:`SharedBatch`; ``segment_view`` is a uint8 view of the whole segment.

    Every array of the batch ends up with ``segment_view`` as its ``base``, so
    the batch is alive exactly as long as ``segment_view`` is.
    """
    if isinstance(batch.meta, Plain):
        return book.decode(batch.meta, itertools.repeat(segment_view), [o for o, _ in batch.layout])
    buffers = [segment_view[offset : offset + nbytes] for offset, nbytes in batch.layout]
    return pickle.loads(batch.meta, buffers=buffers)
