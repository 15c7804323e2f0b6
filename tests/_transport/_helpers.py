"""A worker's side of the transport, run in the test process, and nested-batch comparisons."""

from __future__ import annotations

import os
from collections import namedtuple
from typing import Any

import numpy as np
import pyarrow as pa

from dataloader._transport.arena import Segment, SegmentPool
from dataloader._transport.receiver import Receiver

from ..harness import assert_same

Pair = namedtuple("Pair", ["first", "second"])


class LocalWorker:
    """A :class:`SegmentPool` whose announcements go straight to ``receiver`` (if any).

    ``created`` and ``retired`` list the segment ids in the order the pool
    reported them; ``segments`` maps the live ones.
    """

    def __init__(self, budget: int, receiver: Receiver | None = None, worker_id: int = 0) -> None:
        self.receiver = receiver
        self.worker_id = worker_id
        self.created: list[int] = []
        self.retired: list[int] = []
        self.segments: dict[int, Segment] = {}
        self.pool = SegmentPool(budget, "transport-test", self._announce, self._retire)

    def _announce(self, segment: Segment, fd: int) -> None:
        assert os.fstat(fd).st_size == segment.size
        self.created.append(segment.id)
        self.segments[segment.id] = segment
        if self.receiver is not None:
            self.receiver.add_segment(self.worker_id, segment.id, os.dup(fd), segment.size)

    def _retire(self, segment_id: int) -> None:
        self.retired.append(segment_id)
        self.segments.pop(segment_id, None)
        if self.receiver is not None:
            self.receiver.remove_segment(self.worker_id, segment_id)

    def view(self, segment_id: int) -> np.ndarray:
        """A uint8 view of a whole segment (the worker's own mapping)."""
        return np.frombuffer(self.segments[segment_id].buffer, np.uint8)

    def close(self) -> None:
        self.pool.close()


def base_chain(array: np.ndarray) -> list:
    """``array``, its ``.base``, that one's ``.base``, ... (through memoryviews)."""
    chain = [array]
    while True:
        last = chain[-1]
        if isinstance(last, np.ndarray) and last.base is not None:
            chain.append(last.base)
        elif isinstance(last, memoryview) and last.obj is not None:
            chain.append(last.obj)
        else:
            return chain


def reaches(array: np.ndarray, target: Any) -> bool:
    return any(link is target for link in base_chain(array))


def assert_identical(original: Any, decoded: Any, path: str = "batch") -> None:
    """Same structure, types, dtypes, shapes, memory order and bytes (NaN payloads included)."""
    assert_same(original, decoded, path, leaf=_identical_leaf)


def _identical_leaf(original: Any, decoded: Any, path: str) -> bool:
    if isinstance(original, np.ndarray):
        contiguous = original.flags.c_contiguous or original.flags.f_contiguous
        if not contiguous and decoded.dtype == original.dtype.newbyteorder("="):
            # NumPy's in-band pickle (the one non-contiguous arrays get) returns
            # non-native byte orders as native: same values, other bytes.
            original = original.astype(decoded.dtype)
        assert decoded.dtype == original.dtype, f"{path}: dtype {decoded.dtype} != {original.dtype}"
        assert decoded.shape == original.shape, f"{path}: shape {decoded.shape} != {original.shape}"
        if original.flags.c_contiguous:
            assert decoded.flags.c_contiguous, f"{path}: lost C order"
        if original.flags.f_contiguous:
            assert decoded.flags.f_contiguous, f"{path}: lost Fortran order"
        assert decoded.tobytes() == original.tobytes(), f"{path}: values differ"
        return True
    if isinstance(original, (pa.Array, pa.ChunkedArray, pa.RecordBatch, pa.Table)):
        assert decoded.equals(original), f"{path}: Arrow data differs"
        return True
    return False


def send_without_segments(worker: "LocalWorker", caplog: Any) -> list[str]:
    """Pack a batch twice and allocate a private array through ``worker``'s pool where segments
    cannot be made; check that both went inline, whole, and return the warnings logged."""
    import logging

    from dataloader._transport.arena import BumpAllocator
    from dataloader._transport.codec import InlineBatch, pack, split

    batch = np.arange(100 * 1024, dtype=np.uint8)
    with caplog.at_level(logging.DEBUG, logger="dataloader"):
        payloads = [pack(*split(batch), worker.pool, None) for _ in range(2)]
        allocate = BumpAllocator(acquire=lambda: worker.pool.acquire(2**20))
        private = allocate((10,), np.dtype(np.uint8))
    assert all(isinstance(p, InlineBatch) for p in payloads)
    assert bytes(payloads[0].buffers[0]) == batch.tobytes()
    assert allocate.segment is None and private.flags.owndata
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
