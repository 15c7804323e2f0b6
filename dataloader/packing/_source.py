"""The source a packer reads: what kind it is, opening it at a window's start, and the position
a state keeps of it (its own ``state_dict()``, else a count of the samples read)."""

from __future__ import annotations

import copy
import numbers
from typing import Any, Iterator

from .._shares import check_readable, is_map, keeps_state, open_stream, share, source_fingerprint
from ..errors import ArgumentValueError
from ..worker import get_worker_info


class Source:
    """A stream (``__iter__`` starts a fresh pass) or a map dataset read in order, one contiguous
    block of its indices per rank and, in each, one per worker."""

    def __init__(self, source: Any, world_size: int, rank: int) -> None:
        check_readable("PackedStream: `source`", source,
                       "a PackedStream reads its source again every epoch (and on a resume)")
        if getattr(source, "yields_batches", False) is True:
            raise ArgumentValueError(
                f"PackedStream: the source {type(source).__name__} yields whole batches (it was built "
                "with batch_size=...); a packer needs one sample at a time. Build it without "
                "batch_size (ParquetStream(..., batch_size=None))."
            )
        self.source, self.world_size, self.rank = source, world_size, rank
        self.is_map = is_map(source)
        self.keeps_state = keeps_state(source)
        self._check_world()

    def _check_world(self) -> None:
        own = (getattr(self.source, "world_size", None), getattr(self.source, "rank", None))
        if not self.is_map and all(isinstance(v, numbers.Integral) for v in own) and own != (self.world_size, self.rank):
            raise ArgumentValueError(
                f"PackedStream: the source is sharded for world_size={own[0]}, rank={own[1]}, but the "
                f"packer for world_size={self.world_size}, rank={self.rank}. Build both with the same "
                "world_size and rank."
            )

    def open(self, epoch: int, position: Any) -> Iterator[Any]:
        """The samples of ``epoch`` from ``position`` (what :meth:`position` gave; None: the start)."""
        if self.is_map:
            return map(self.source.__getitem__, self._indices()[int(position or 0):])
        if self.keeps_state:
            return open_stream(self.source, epoch, position)
        return open_stream(self.source, epoch, skip=int(position or 0))

    def position(self, read: int) -> Any:
        """Where the source stands after ``read`` samples of this epoch: its own ``state_dict()``
        (copied: the source goes on reading), else ``read``."""
        if self.keeps_state:
            return copy.deepcopy(self.source.state_dict())
        return read

    def check_resume(self, position: Any) -> None:
        """Refuse a position this source cannot go back to (a ``resume_refused`` stream)."""
        refused = getattr(self.source, "resume_refused", None)
        if refused and position and not self.keeps_state:
            raise ArgumentValueError(f"PackedStream: the source cannot resume: {refused}")

    def _indices(self) -> range:
        info = get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        return range(*share(len(self.source), self.world_size, self.rank, worker, workers))

    def fingerprint(self) -> Any:
        """What decides the source's samples and their order: its ``order_fingerprint()``, else its
        class (and a map dataset's length)."""
        return source_fingerprint(self.source)
