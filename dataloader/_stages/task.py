"""The unit of work handed from a source to a batch maker."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class BatchTask:
    """One batch to make.

    ``index`` numbers batches within an epoch in the order the source produced
    them; the reorder buffer delivers by it and seeding derives from it.
    Exactly one of ``indices`` (map datasets) and ``samples`` (raw stream
    samples read by the main process) is set; neither is set when a worker
    reads its own shard of a stream (``parallel_stream=True``).
    """

    epoch: int
    index: int
    indices: list[int] | None = None
    samples: list[Any] | None = None
