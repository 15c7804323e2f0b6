"""A source that calls a function for each batch: :class:`CallableSource`.

For replay buffers and other samplers that are functions rather than
datasets (DI-engine's AsyncDataLoader). ``data_source(batch_size)`` returns
either ready samples, collated as they are, or zero-argument jobs that the
workers run to produce the samples. With ``chunk_size``, one batch's jobs
are split into parts of that many jobs, spread over the workers, and the
loader puts the batch back together in job order. It never ends by itself:
bound epochs with ``epoch_size`` or stop iterating; ``close()`` stops it.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

from ._digest import qualified_name
from ._validate import check_positive_int
from .dataset import StreamDataset
from .errors import ArgumentTypeError, ArgumentValueError


class CallableSource(StreamDataset):
    """Batches from ``data_source(batch_size)``; use it with ``StreamSampler(batch_size)``.

    Jobs sent to process workers are pickled: make them module-level
    functions or ``functools.partial`` objects, or use ``worker_type="thread"``.
    """

    def __init__(self, data_source: Callable[[int], list[Any]], chunk_size: int | None = None) -> None:
        if not callable(data_source):
            raise ArgumentTypeError(
                f"`data_source` must be callable (batch_size) -> list; got {type(data_source).__name__}."
            )
        self.data_source = data_source
        self.chunk_size = None if chunk_size is None else check_positive_int("chunk_size", chunk_size)

    def __iter__(self) -> Iterator[Any]:
        raise TypeError("a CallableSource is read by the DataLoader a batch at a time, not iterated")

    def order_fingerprint(self) -> dict[str, Any]:
        """What decides the batches, for a loader's resume state: the function, its own
        ``order_fingerprint()`` if it has one, and ``chunk_size``."""
        own = getattr(self.data_source, "order_fingerprint", None)
        return {
            "data_source": qualified_name(self.data_source),
            "chunk_size": self.chunk_size,
            "own": None if own is None else own(),
        }

    def check_batch_size(self, batch_size: int) -> None:
        """Raise unless ``chunk_size`` divides ``batch_size``."""
        if self.chunk_size is not None and batch_size % self.chunk_size:
            raise ArgumentValueError(
                f"`chunk_size` must divide the batch size; got chunk_size={self.chunk_size} for "
                f"batch_size={batch_size}. Pick a divisor of {batch_size}."
            )
