"""Plain batches described by a cached skeleton instead of a pickle.

Most batches are tuples, lists or dicts of C-contiguous NumPy arrays whose
containers and dtypes repeat from batch to batch. For those the worker sends
a number naming the *skeleton* (the containers and each array's dtype; sent in
full the first time only) plus each array's shape, and the main process
rebuilds the batch with one ``np.ndarray`` constructor per array. Pickling the
structure with protocol 5 costs each side tens of microseconds a batch, most of
it NumPy's per-array reconstruction; this costs a few. Shapes travel per batch,
so batches whose lengths vary (padded text, say) share one skeleton. Anything
else (numbers, strings, Arrow data, custom objects, non-contiguous or object
arrays) still travels as a pickle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Iterator

import numpy as np

# A worker names at most this many skeletons; past that, each batch carries its own.
MAX_NAMED = 1024
_UNNAMED = -1

_ARRAY = 0  # a leaf in a skeleton's tree
_KEY_TYPES = (str, int, bytes)


class _NotPlain(Exception):
    """The batch holds something a skeleton cannot describe: pickle it instead."""


@dataclass(frozen=True)
class Skeleton:
    """A batch's containers (``tree``) and the dtype of each array, in depth-first order."""

    tree: Any
    dtypes: tuple[np.dtype, ...]

    def build(self, arrays: list[np.ndarray]) -> Any:
        """The batch with ``arrays`` as its leaves."""
        return _build(self.tree, iter(arrays))


@dataclass(frozen=True)
class Plain:
    """The meta of a plain batch: skeleton ``number`` (in full with it the first time) and shapes."""

    number: int
    shapes: tuple[tuple[int, ...], ...]
    skeleton: Skeleton | None = None


def flatten(batch: Any) -> tuple[Skeleton, tuple[tuple[int, ...], ...], list[np.ndarray]] | None:
    """(skeleton, shapes, arrays) of a plain batch; None for anything a pickle must carry."""
    arrays: list[np.ndarray] = []
    try:
        tree = _node(batch, arrays)
    except _NotPlain:
        return None
    return Skeleton(tree, tuple(a.dtype for a in arrays)), tuple(a.shape for a in arrays), arrays


def as_bytes(array: np.ndarray) -> memoryview:
    """A C-contiguous array's data as a flat byte view (any dtype, 0-d and empty included)."""
    return memoryview(array.reshape(-1).view(np.uint8))


def _node(value: Any, arrays: list[np.ndarray]) -> Any:
    cls = type(value)
    if cls is np.ndarray:
        if value.dtype.hasobject or not value.flags.c_contiguous:
            raise _NotPlain
        arrays.append(value)
        return _ARRAY
    if cls is tuple or cls is list:
        return (cls, tuple(_node(v, arrays) for v in value))
    if cls is dict:
        if not all(type(k) in _KEY_TYPES for k in value):
            raise _NotPlain
        return (dict, tuple(value), tuple(_node(v, arrays) for v in value.values()))
    if issubclass(cls, tuple) and hasattr(cls, "_fields"):  # a namedtuple
        return (cls, tuple(_node(v, arrays) for v in value))
    raise _NotPlain


def _build(node: Any, arrays: Iterator[np.ndarray]) -> Any:
    if node is _ARRAY:
        return next(arrays)
    cls = node[0]
    if cls is dict:
        return {key: _build(child, arrays) for key, child in zip(node[1], node[2])}
    children = [_build(child, arrays) for child in node[1]]
    if cls is list:
        return children
    return tuple(children) if cls is tuple else cls(*children)


class SkeletonNames:
    """The worker's side: numbers the skeletons it has sent, so each is sent once."""

    def __init__(self) -> None:
        self._numbers: dict[Skeleton, int] = {}

    def plain(self, skeleton: Skeleton, shapes: tuple[tuple[int, ...], ...]) -> Plain:
        number = self._numbers.get(skeleton)
        if number is not None:
            return Plain(number, shapes)
        if len(self._numbers) >= MAX_NAMED:
            return Plain(_UNNAMED, shapes, skeleton)
        number = self._numbers[skeleton] = len(self._numbers)
        return Plain(number, shapes, skeleton)


class SkeletonBook:
    """The main process's side: the skeletons one worker has sent, by number.

    Every :class:`Plain` a worker sends must pass through :meth:`decode`, in
    the order sent, the batches nobody will see included: a skeleton comes
    in full only once.
    """

    def __init__(self) -> None:
        self._skeletons: dict[int, Skeleton] = {}

    def learn(self, meta: Plain) -> Skeleton:
        if meta.skeleton is None:
            return self._skeletons[meta.number]
        if meta.number != _UNNAMED:
            self._skeletons[meta.number] = meta.skeleton
        return meta.skeleton

    def decode(self, meta: Plain, buffers: Iterable[Any], offsets: Iterable[int]) -> Any:
        """The batch of ``meta``: array ``i`` is a view of ``buffers[i]`` at ``offsets[i]``."""
        skeleton = self.learn(meta)
        return skeleton.build([
            np.ndarray(shape, dtype, buffer=buffer, offset=offset)
            for shape, dtype, buffer, offset in zip(meta.shapes, skeleton.dtypes, buffers, offsets)
        ])
