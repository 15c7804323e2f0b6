"""The contract of a batch sampler, and a stream's sampler."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Iterator

from .._validate import check_bool, check_positive_int


class Sampler(ABC):
    """A batch sampler: iterating it yields lists of indices; ``len()`` counts the batches."""

    @abstractmethod
    def __iter__(self) -> Iterator[list[int]]: ...

    @abstractmethod
    def __len__(self) -> int: ...


class StreamSampler(Sampler):
    """The sampler of a stream dataset: only its ``batch_size`` and ``drop_last`` matter.

    ``drop_last=True`` drops the stream's last batch when it is short (each worker's, where each
    reads its own shard with ``parallel_stream=True``), as PyTorch does. Iterating yields
    ``list(range(batch_size))`` forever; ``len()`` raises ``TypeError``.
    """

    def __init__(self, batch_size: int = 1, drop_last: bool = False) -> None:
        self.batch_size = check_positive_int("batch_size", batch_size)
        self.drop_last = check_bool("drop_last", drop_last)

    def __iter__(self) -> StreamSampler:
        return self

    def __next__(self) -> list[int]:
        return list(range(self.batch_size))

    def __len__(self) -> int:
        raise TypeError("StreamSampler has no length: a stream's length is unknown.")
