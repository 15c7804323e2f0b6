"""The main process's side of the transport.

It maps the segments workers announce, turns each :class:`SharedBatch` into
a batch of zero-copy views, and notices when the user has dropped the last
view of a batch (a weak reference on the per-batch base array) so the worker
may reuse that segment. Notices may come from any thread (garbage
collection), so they go to a queue; while the executor sleeps (``sleeping``)
they also write to a wake-up pipe it waits on. A drop while it is awake needs
no system call: it reads the queue before it sleeps again.
"""

from __future__ import annotations

import collections
import os
import weakref
from typing import Any

import numpy as np

from ..errors import DataLoaderError, SharedMemoryError
from .codec import InlineBatch, LocalBatch, SharedBatch, decode_inline, decode_shared
from .mapping import map_shared
from .skeleton import Plain, SkeletonBook


class Receiver:
    """Segments mapped from the workers, and the batches lent out of them."""

    def __init__(self) -> None:
        self._maps: dict[tuple[int, int], memoryview] = {}
        self.mapped_bytes = 0
        self._leases: dict[int, weakref.ref] = {}
        self._books: collections.defaultdict[int, SkeletonBook] = collections.defaultdict(SkeletonBook)
        self._released: collections.deque[tuple[int, int]] = collections.deque()
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        os.set_blocking(self._wake_write, False)
        # Set by the executor before it reads the queue and then blocks; a drop seen
        # with it set writes to the pipe (set first, then read: no drop is missed).
        self.sleeping = False
        self._signalled = False
        self._closed = False
        self._owner: int | None = None  # set in a process forked from the owner (see detach)

    @property
    def wakeup_fd(self) -> int:
        """Readable whenever a batch has been dropped by the user."""
        return self._wake_read

    @property
    def lent(self) -> int:
        """Batches whose views the user may still hold."""
        return len(self._leases)

    def add_segment(self, worker_id: int, segment_id: int, fd: int, size: int) -> None:
        """Map a worker's new segment; ``fd`` is closed at once (the mapping needs none)."""
        try:
            self._maps[(worker_id, segment_id)] = map_shared(fd, size)
            self.mapped_bytes += size
        except OSError as error:
            raise SharedMemoryError(
                f"cannot map a shared segment of {size / 2**20:.1f} MiB from worker {worker_id}: "
                f"{os.strerror(error.errno)}. The main process holds {len(self._maps)} segments; "
                "each batch you keep holds one: keep fewer (copy what you keep), or raise the "
                "limit on mappings (sysctl vm.max_map_count) or on address space (ulimit -v)."
            ) from error
        finally:
            os.close(fd)

    def remove_segment(self, worker_id: int, segment_id: int) -> None:
        # Views still alive keep the mapping through their base; it unmaps with them.
        mapping = self._maps.pop((worker_id, segment_id), None)
        if mapping is not None:
            self.mapped_bytes -= len(mapping)

    def remove_worker(self, worker_id: int) -> None:
        for key in [key for key in self._maps if key[0] == worker_id]:
            self.remove_segment(*key)
        self._books.pop(worker_id, None)

    def decode(self, worker_id: int, payload: InlineBatch | SharedBatch | LocalBatch) -> Any:
        """The batch in ``payload``, lent from its segment until the user drops it."""
        if isinstance(payload, LocalBatch):
            return payload.value
        if isinstance(payload, InlineBatch):
            return decode_inline(payload, self._books[worker_id])
        key = (worker_id, payload.segment_id)
        base = np.frombuffer(self._maps[key], np.uint8)
        batch = decode_shared(payload, base, self._books[worker_id])
        lease = id(base)
        self._leases[lease] = weakref.ref(base, lambda _ref: self._on_drop(lease, key))
        return batch

    def discard(self, worker_id: int, payload: InlineBatch | SharedBatch | LocalBatch) -> None:
        """Give a batch nobody will see (a stale epoch's) straight back."""
        if isinstance(getattr(payload, "meta", None), Plain):
            self._books[worker_id].learn(payload.meta)  # its skeleton may come in full only here
        if isinstance(payload, SharedBatch):
            self._released.append((worker_id, payload.segment_id))

    def drain(self) -> dict[int, list[int]]:
        """Segments dropped since the last call, by worker (the executor calls it at every
        ``next()``, so a forked child that calls ``next()`` learns here that it cannot)."""
        if self._owner is not None:
            raise DataLoaderError(
                f"this DataLoader iterator belongs to process {self._owner}; a forked child "
                f"(process {os.getpid()}) cannot use it: its workers serve the parent. Create a "
                "new DataLoader in the child, or start a new epoch there with iter(loader)."
            )
        if self._signalled:
            self._signalled = False
            try:
                while os.read(self._wake_read, 4096):
                    pass
            except (BlockingIOError, OSError):
                pass
        dropped: dict[int, list[int]] = {}
        while self._released:
            worker_id, segment_id = self._released.popleft()
            dropped.setdefault(worker_id, []).append(segment_id)
        return dropped

    def detach(self, owner: int) -> None:
        """In a process forked from ``owner``: close this process's copy of the wake-up pipe (a
        drop here must not wake the owner), stop listening, and refuse to hand out batches."""
        self._owner = owner
        self.close()

    def close(self) -> None:
        """Stop listening; mappings stay valid for views the user still holds."""
        if self._closed:
            return
        self._closed = True
        self._leases.clear()
        self._maps.clear()
        self.mapped_bytes = 0
        os.close(self._wake_read)
        os.close(self._wake_write)

    def _on_drop(self, lease: int, key: tuple[int, int]) -> None:
        if self._closed:
            return
        self._leases.pop(lease, None)
        self._released.append(key)
        if not self.sleeping:
            return
        try:
            os.write(self._wake_write, b"\0")
        except (BlockingIOError, OSError):
            pass
        # After the write: a drop in another thread (garbage collection) that set the flag
        # first could have the pipe drained before its byte arrived, leaving it readable
        # with the flag clear, and every later poll would return at once.
        self._signalled = True
