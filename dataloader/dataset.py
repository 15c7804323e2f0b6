"""Datasets: random-access :class:`Dataset` and iterable :class:`StreamDataset`."""

from __future__ import annotations

import bisect
from abc import ABC, abstractmethod
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

from .errors import ArgumentTypeError, ArgumentValueError


class Dataset(ABC):
    """A dataset with random access: ``dataset[i]`` for ``0 <= i < len(dataset)``.

    Subclasses define ``__getitem__`` and ``__len__``; they need not define ``__init__``.
    """

    @abstractmethod
    def __getitem__(self, index: int) -> Any: ...

    @abstractmethod
    def __len__(self) -> int: ...


class StreamDataset(ABC):
    """A dataset read in order: each ``next()`` on ``iter(dataset)`` yields one sample.

    Each epoch calls ``iter(dataset)`` afresh; the epoch ends when that iterator does.
    """

    @abstractmethod
    def __iter__(self) -> Iterator[Any]: ...


class ArrayDataset(Dataset):
    """Item ``i`` is the tuple ``(array_0[i], array_1[i], ...)``.

    Any sequence with ``len()`` and indexing works (NumPy arrays, lists, Arrow arrays).
    """

    def __init__(self, *arrays: Sequence) -> None:
        if not arrays:
            raise ArgumentValueError("ArrayDataset needs at least one array; got none.")
        lengths = [len(a) for a in arrays]
        if len(set(lengths)) != 1:
            raise ArgumentValueError(
                f"ArrayDataset arrays must all have the same length; got lengths {lengths}."
            )
        self.arrays = arrays
        self._length = lengths[0]

    def __getitem__(self, index: int) -> tuple:
        return tuple(array[index] for array in self.arrays)

    def __len__(self) -> int:
        return self._length


class ConcatDataset(Dataset):
    """The datasets one after another; negative indices count from the end."""

    def __init__(self, datasets: Iterable[Dataset]) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise ArgumentValueError("ConcatDataset needs at least one dataset; got none.")
        for position, dataset in enumerate(self.datasets):
            if isinstance(dataset, StreamDataset):
                raise ArgumentTypeError(
                    f"ConcatDataset takes random-access datasets only; datasets[{position}] is "
                    f"the StreamDataset {type(dataset).__name__}. Chain streams with "
                    "itertools.chain inside a StreamDataset instead."
                )
            if not hasattr(dataset, "__getitem__") or not hasattr(dataset, "__len__"):
                raise ArgumentTypeError(
                    f"ConcatDataset: datasets[{position}] ({type(dataset).__name__}) has no "
                    "__getitem__/__len__."
                )
        self.cumulative_sizes = np.cumsum([len(d) for d in self.datasets]).tolist()

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, index: int) -> Any:
        length = len(self)
        if index < 0:
            index += length
        if not 0 <= index < length:
            raise IndexError(f"index {index} is out of range for ConcatDataset of length {length}")
        which = bisect.bisect_right(self.cumulative_sizes, index)
        start = self.cumulative_sizes[which - 1] if which else 0
        return self.datasets[which][index - start]
