"""Datasets: random-access :class:`Dataset` and iterable :class:`StreamDataset`."""

from __future__ import annotations

import bisect
from abc import ABC, abstractmethod
from typing import Any, Callable, Iterable, Iterator, Protocol, cast

import numpy as np

from . import _alloc
from ._validate import check_non_negative_int
from .errors import ArgumentTypeError, ArgumentValueError, DataLoaderError


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


class Collated:
    """A batch a dataset made itself: the loader hands it out without collating it.

    A dataset's ``__getitems__(indices)`` may return one instead of a list of
    samples, and a stream with ``yields_batches = True`` yields them: reading a
    whole batch in one bulk call (fancy indexing, ``Table.take``, a Parquet
    read) is far cheaper than making its samples one by one. With no
    per-sample transform the loader skips both transform and collate; with
    one, it needs the batch's samples, which ``rows`` (a zero-argument
    callable) returns; without ``rows`` that is a clear error.
    """

    __slots__ = ("batch", "size", "_rows")

    def __init__(self, batch: Any, size: int, rows: Callable[[], list[Any]] | None = None) -> None:
        self.batch = batch
        self.size = check_non_negative_int("size", size)  # samples in the batch (the monitor counts them)
        self._rows = rows

    @property
    def has_rows(self) -> bool:
        """Whether :meth:`rows` can give the batch's samples."""
        return self._rows is not None

    def rows(self) -> list[Any]:
        """The batch as a list of samples, for a per-sample transform."""
        if self._rows is None:
            raise DataLoaderError(
                "the dataset returned a collated batch (dataloader.Collated) without its rows, and "
                "the loader has a per-sample transform to run on them. Pass rows= to Collated, or "
                "apply the transform to whole batches with a BatchTransform."
            )
        return self._rows()


def read_samples(dataset: Any, indices: list[int]) -> list[Any] | Collated:
    """The samples at ``indices``: one ``__getitems__`` call where the dataset has it (which may
    return the batch already collated, a :class:`Collated`), else ``dataset[i]`` for each."""
    getitems = getattr(dataset, "__getitems__", None)
    if getitems is not None:
        got = getitems(indices)
        return got if isinstance(got, Collated) else list(got)
    return [dataset[i] for i in indices]


def batch_array(shape: tuple[Any, ...], dtype: Any) -> np.ndarray:
    """An uninitialised array for a batch a dataset collates itself (see :class:`Collated`).

    Inside a worker it is carved out of the shared memory the batch travels
    in, so filling it (``np.take(..., out=)``) is the batch's only copy.
    """
    return _alloc.empty(tuple(shape), np.dtype(dtype))


class Indexable(Protocol):
    """What :class:`ArrayDataset` needs of an array: ``len()`` and indexing by an int."""

    def __len__(self) -> int: ...

    def __getitem__(self, index: Any, /) -> Any: ...


class ArrayDataset(Dataset):
    """Item ``i`` is the tuple ``(array_0[i], array_1[i], ...)``.

    Any sequence with ``len()`` and indexing works (NumPy arrays, lists, Arrow arrays).
    """

    def __init__(self, *arrays: Indexable) -> None:
        if not arrays:
            raise ArgumentValueError("ArrayDataset needs at least one array; got none.")
        lengths = [len(a) for a in arrays]
        if len(set(lengths)) != 1:
            raise ArgumentValueError(
                f"ArrayDataset arrays must all have the same length; got lengths {lengths}."
            )
        self.arrays = arrays
        self._length = lengths[0]
        # Object or string arrays collate to lists, not arrays: they keep the per-sample path.
        self._bulk = all(isinstance(a, np.ndarray) and a.dtype.kind in "biufcmM" for a in arrays)

    def __getitem__(self, index: int) -> tuple[Any, ...]:
        return tuple(array[index] for array in self.arrays)

    def __getitems__(self, indices: list[int]) -> Collated | list[Any]:
        """One bulk read per array when every array is a NumPy array of numbers (or bools)."""
        if not self._bulk:
            return [self[i] for i in indices]
        positions = _positions(indices, self._length)
        batch = tuple(_take(cast(np.ndarray, array), positions) for array in self.arrays)
        return Collated(batch, len(indices), rows=lambda: [self[i] for i in indices])

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
        self.cumulative_sizes: list[int] = np.cumsum([len(d) for d in self.datasets]).tolist()

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


def _positions(indices: list[int], length: int) -> np.ndarray:
    """``indices`` as an array of positions in ``[0, length)``, negative ones counted from the end."""
    positions = np.asarray(indices, dtype=np.intp)
    if positions.size and (positions.min() < -length or positions.max() >= length):
        raise IndexError(f"index out of range for an array of length {length}: {indices}")
    return np.where(positions < 0, positions + length, positions)


def _take(array: np.ndarray, positions: np.ndarray) -> np.ndarray:
    out = batch_array((len(positions), *array.shape[1:]), array.dtype)
    # The positions are checked, so "clip" is exact; unlike the default mode it writes straight into out.
    return np.take(array, positions, axis=0, out=out, mode="clip")
