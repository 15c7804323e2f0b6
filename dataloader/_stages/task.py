"""The unit of work handed from a source to a batch maker."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np


@dataclass(slots=True)
class BatchTask:
    """One batch to make; never changed once made (not frozen: a frozen dataclass takes three
    times as long to build, and one is built per batch).

    ``index`` numbers batches within an epoch in the order the source produced
    them; the reorder buffer delivers by it and seeding derives from it.
    At most one of ``indices`` (map datasets), ``samples`` (raw stream
    samples read by the main process) and ``jobs`` (zero-argument callables
    from a :class:`~dataloader.CallableSource`) is set; none is set when a
    worker reads its own shard of a stream (``parallel_stream=True``).
    ``chunk`` marks one part of a batch split across workers: (batch number,
    parts in that batch, this part's position, the place of its first sample in the batch);
    its samples come back uncollated, as a :class:`Chunk`.
    """

    epoch: int
    index: int
    # A list, or an int64 array from one of our samplers (see listed()).
    indices: list[int] | np.ndarray | None = None
    samples: list[Any] | None = None
    jobs: list[Callable[[], Any]] | None = None
    chunk: tuple[int, int, int, int] | None = None
    # A worker reading its own stream shard drops this many batches first (a resumed epoch).
    skip: int = 0
    # Samples known to kill the process that reads them (found after a worker died, see
    # _exec/recovery.py): (key or position, stage, what happened, signal name) each. They are
    # not read again: they fail at once, and the error policy leaves them out or replaces them.
    bad: tuple[tuple[Any, str, str, str], ...] = ()


@dataclass(frozen=True)
class Chunk:
    """Transformed but uncollated samples of one part of a batch (see ``BatchTask.chunk``)."""

    batch: int
    parts: int
    index: int
    samples: list[Any]
    epoch: int = 0
    # Places in ``samples`` (None there) whose samples failed with no good one in this part to
    # stand in (``on_error="replace"``): the whole batch's other samples fill them.
    vacant: tuple[int, ...] = ()


def listed(indices: Any) -> Any:
    """A task's indices as the dataset and the error messages see them: a list of Python ints
    (our samplers' int64 arrays converted), or as they are."""
    return indices.tolist() if type(indices) is np.ndarray else indices
