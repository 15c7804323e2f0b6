"""The worker's side of the transport: reusable segments and a bump allocator.

A worker owns its segments. A segment is *free* (the worker may write into
it) or *lent* (the main process holds views of a batch in it) until the main
process says the user dropped the last view. Reusing segments instead of
creating one per batch is what keeps the transport fast: fresh pages cost
several times the copy itself to fault in.
"""

from __future__ import annotations

import collections
import errno
import logging
import os
import resource
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .mapping import address_limit, map_shared, unsendable
from .segment import align, create_fd, reserve

logger = logging.getLogger("dataloader")

_SMALL_ROUND = 64 * 1024
_LARGE_ROUND = 1024 * 1024
# New segments get this much headroom over the largest batch seen, so batches
# that vary a little in size keep fitting the segments already made.
_GROWTH = 1.25
# Every this many acquisitions a pool keeps the most segments lent at once in
# that stretch, plus one, and retires the free rest: the memory a burst of held
# batches made comes back once the burst is over, while a steady state (where
# each segment is lent again within a few batches) never recreates one.
TRIM_WINDOW = 64
# A worker keeps the descriptors of at most this many segments, the ones it used
# last: a segment's descriptor is needed only to reserve its headroom, and one per
# segment would reach ``ulimit -n`` in a worker whose batches the user holds by the
# hundred. Steady loading cycles through a few segments, all of which keep theirs.
OPEN_DESCRIPTORS = 16


def segment_size(need: int) -> int:
    """The size of a new segment that holds ``need`` bytes with headroom."""
    want = int(need * _GROWTH)
    step = _SMALL_ROUND if want < _LARGE_ROUND else _LARGE_ROUND
    return max(step, -(-want // step) * step)


@dataclass(eq=False)
class Segment:
    """One mapped segment owned by a worker.

    ``buffer`` is the mapping; it holds no descriptor. ``fd`` stays open only while
    the segment has headroom no batch has reached, so that ``back`` can reserve
    it when a bigger batch comes (until then only ``backed`` bytes take memory),
    and only for the segments its pool used last (:data:`OPEN_DESCRIPTORS`).
    Without its descriptor a segment holds ``capacity`` bytes: what was backed.
    """

    id: int
    size: int
    buffer: memoryview
    fd: int = -1
    backed: int = 0
    capacity: int = field(init=False)
    address: int = field(init=False)
    free: bool = True
    # When it was last freed (a counter): the most recently freed segment is
    # reused first, its pages still in cache and in the TLB.
    freed: int = 0

    def __post_init__(self) -> None:
        self.capacity = self.size if self.fd >= 0 else self.backed
        probe = np.frombuffer(self.buffer, np.uint8, count=1)
        self.address = probe.ctypes.data
        del probe

    def back(self, nbytes: int) -> None:
        """Make sure the first ``nbytes`` (at most ``capacity``) are backed by memory before
        they are written."""
        if nbytes > self.backed:
            reserve(self.fd, self.backed, nbytes - self.backed)
            self.backed = nbytes
            if nbytes >= self.size:
                self.close_fd()  # nothing left to reserve

    def offset_of(self, view: memoryview) -> int | None:
        """Where ``view`` starts inside this segment, or None if it lies elsewhere."""
        if view.nbytes == 0:
            return None
        start = np.frombuffer(view, np.uint8).ctypes.data - self.address
        if 0 <= start and start + view.nbytes <= self.size:
            return start
        return None

    def close_fd(self) -> None:
        """Give up the descriptor: the segment keeps what is backed, and can grow no more."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
            self.capacity = self.backed

    def close(self) -> None:
        """Close the descriptor; the mapping goes with the last view of it (batches in flight)."""
        self.close_fd()


_NO_DESCRIPTOR = (errno.EMFILE, errno.ENFILE)


class NoSegment(Exception):
    """A new segment could not be made for lack of a process resource: a descriptor
    (``ulimit -n``) or address space to map it in (``ulimit -v``). The pool logged why."""


class SegmentPool:
    """A worker's segments, bounded by ``budget`` bytes.

    ``announce(segment, fd)`` tells the main process about a new segment (and
    passes its descriptor); ``retire(segment_id)`` tells it one is gone.
    Segments beyond what recent batches needed are retired (see :data:`TRIM_WINDOW`).
    When no descriptor can be opened for a new segment, or no address space is left to map it,
    :meth:`acquire` raises :class:`NoSegment` (after a warning): the batch then travels inline.
    """

    def __init__(
        self,
        budget: int,
        name: str,
        announce: Callable[[Segment, int], None],
        retire: Callable[[int], None],
    ) -> None:
        self.budget = budget
        self._name = name
        self._announce = announce
        self._retire = retire
        self._segments: dict[int, Segment] = {}
        self._next_id = 0
        self._freed = 0
        self._acquired = 0  # acquisitions in the current trim window
        self._peak = 0  # the most segments lent at once in it
        # Segments whose descriptor is open, least recently used first (see OPEN_DESCRIPTORS).
        self._open: collections.OrderedDict[int, Segment] = collections.OrderedDict()
        self._warned: set[str] = set()  # the shortages warned of: later ones log at DEBUG

    @property
    def reserved(self) -> int:
        """Bytes held by all segments, free or lent."""
        return sum(s.size for s in self._segments.values())

    def acquire(self, need: int) -> Segment | None:
        """A free segment of at least ``need`` bytes, made if the budget allows, else None."""
        fitting = [s for s in self._segments.values() if s.free and s.capacity >= need]
        if fitting:
            segment = max(fitting, key=lambda s: s.freed)
            if segment.fd >= 0:
                self._open.move_to_end(segment.id)
            segment.back(need)
        else:
            size = segment_size(need)
            if not self._make_room(size):
                return None
            segment = self._create(size, need)
        segment.free = False
        self._count_lent()
        return segment

    def give_back(self, segment: Segment) -> None:
        """Mark a segment this worker took but did not lend as free again."""
        self._free(segment)

    def release(self, segment_ids: tuple[int, ...] | list[int]) -> None:
        """The main process no longer holds views of these segments."""
        for segment_id in segment_ids:
            segment = self._segments.get(segment_id)
            if segment is not None:
                self._free(segment)

    def _free(self, segment: Segment) -> None:
        self._freed += 1
        segment.free, segment.freed = True, self._freed

    def _count_lent(self) -> None:
        lent = sum(not s.free for s in self._segments.values())
        self._peak = max(self._peak, lent)
        self._acquired += 1
        if self._acquired >= TRIM_WINDOW:
            self._trim(self._peak + 1)
            self._acquired, self._peak = 0, lent

    def _trim(self, keep: int) -> None:
        """Retire free segments, least recently freed first, until at most ``keep`` remain."""
        surplus = len(self._segments) - keep
        if surplus <= 0:
            return
        idle = sorted((s for s in self._segments.values() if s.free), key=lambda s: s.freed)
        for segment in idle[:surplus]:
            self._retire_segment(segment)

    def close(self) -> None:
        for segment in self._segments.values():
            segment.close()
        self._segments.clear()
        self._open.clear()

    def _make_room(self, size: int) -> bool:
        lent = sum(s.size for s in self._segments.values() if not s.free)
        if lent + size > self.budget:
            return False  # retiring free segments would not be enough: keep them
        # Smallest free segments go first: they are the ones batches outgrew.
        for segment in sorted(self._segments.values(), key=lambda s: s.capacity):
            if self.reserved + size <= self.budget:
                break
            if segment.free:
                self._retire_segment(segment)
        return self.reserved + size <= self.budget

    def _retire_segment(self, segment: Segment) -> None:
        del self._segments[segment.id]
        self._open.pop(segment.id, None)
        self._retire(segment.id)
        segment.close()

    def _create(self, size: int, need: int) -> Segment:
        try:
            # Backed only once mapped: a segment that cannot be mapped costs no memory.
            fd = create_fd(size, f"{self._name}-{self._next_id}", reserved=0)
        except OSError as error:
            if error.errno not in _NO_DESCRIPTOR:
                raise
            raise self._no_segment(error, size) from error
        try:
            buffer = self._map(fd, size)
            reserve(fd, 0, min(need, size))
        except BaseException:
            os.close(fd)
            raise
        segment = Segment(self._next_id, size, buffer, fd, min(need, size))
        try:
            self._announce(segment, fd)
        except BaseException:
            segment.close()
            raise
        self._segments[segment.id] = segment
        self._open[segment.id] = segment
        self._next_id += 1
        while len(self._open) > OPEN_DESCRIPTORS:
            self._open.popitem(last=False)[1].close_fd()
        return segment

    def _map(self, fd: int, size: int) -> memoryview:
        """``size`` bytes of ``fd`` mapped, or :class:`NoSegment` where descriptors or address
        space ran out."""
        try:
            return map_shared(fd, size)
        except (OSError, MemoryError) as error:
            if isinstance(error, OSError) and error.errno not in (*_NO_DESCRIPTOR, errno.ENOMEM):
                raise
            raise self._no_segment(error, size) from error

    def _no_segment(self, error: OSError | MemoryError, size: int) -> NoSegment:
        """Say why batches will travel inline (a warning the first time), and what to raise."""
        kind = "descriptors" if getattr(error, "errno", None) in _NO_DESCRIPTOR else "address space"
        log = logger.debug if kind in self._warned else logger.warning
        self._warned.add(kind)
        if kind == "descriptors":
            log(
                "DataLoader worker process %d has no file descriptor left for a shared-memory "
                "segment (%s; the limit is %d); sending batches through a pipe instead (slower). "
                "Raise the limit (ulimit -n, or resource.setrlimit(resource.RLIMIT_NOFILE, ...) "
                "before the workers start), or keep fewer files open in the dataset.",
                os.getpid(), os.strerror(error.errno), resource.getrlimit(resource.RLIMIT_NOFILE)[0],
            )
        else:
            log(
                "DataLoader worker process %d cannot map a shared-memory segment of %.1f MiB: no "
                "address space left (its limit, RLIMIT_AS or ulimit -v, is %s); sending batches "
                "through a pipe instead (slower). Raise the limit (ulimit -v unlimited, or "
                "resource.setrlimit(resource.RLIMIT_AS, ...) before the workers start), or use "
                "smaller batches; with no such limit, vm.max_map_count was reached.",
                os.getpid(), size / 2**20, address_limit(),
            )
        return NoSegment()


class BumpAllocator:
    """Hands out consecutive aligned arrays from one segment (for the collator).

    With ``acquire`` instead of a segment, the segment is taken at the first
    allocation, after the dataset and transform ran: by then the main process
    has usually said which segments the user dropped, so one is reused rather
    than a new one made (fewer segments stay warmer in the CPU's cache).
    An array that does not fit comes from ``np.empty`` instead; the codec
    copies it in later, so running out of room costs a copy, never an error.
    """

    def __init__(
        self, segment: Segment | None = None, acquire: Callable[[], Segment | None] | None = None
    ) -> None:
        self.segment = segment
        self._acquire = acquire
        self.used = 0

    def __call__(self, shape: tuple, dtype: np.dtype) -> np.ndarray:
        count = int(np.prod(shape, dtype=np.int64))
        nbytes = count * dtype.itemsize
        if nbytes == 0 or dtype.hasobject:
            return np.empty(shape, dtype)
        if self._acquire is not None:
            acquire, self._acquire = self._acquire, None
            try:
                self.segment = acquire()
            except NoSegment:
                self.segment = None  # the batch will travel inline
        start = align(self.used)
        if self.segment is None or start + nbytes > self.segment.capacity:
            return _private(shape, dtype, nbytes)
        self.segment.back(start + nbytes)
        self.used = start + nbytes
        return np.frombuffer(self.segment.buffer, dtype, count=count, offset=start).reshape(shape)


def _private(shape: tuple, dtype: np.dtype, nbytes: int) -> np.ndarray:
    """``np.empty(shape, dtype)``, for an array no segment holds. Where that finds no memory
    under ``ulimit -v`` (the segment could not be mapped either), the limit's error."""
    try:
        return np.empty(shape, dtype)
    except MemoryError as error:
        limited = unsendable(nbytes)
        if limited is None:
            raise
        raise limited from error
