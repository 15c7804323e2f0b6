"""Fixed-width columns as NumPy views of Arrow's own memory: the datasets' fast path.

A column is fixed-width when every row is the same bytes of one NumPy dtype:
numbers, timestamps and durations (NumPy reads Arrow's buffer as it is),
fixed-size lists and fixed-shape tensors of those (an N-d row), and booleans
(Arrow packs them in bits; :func:`~._gather.take_bits` unpacks the rows a
batch needs). :func:`form_of` decides from the type alone; a chunk with nulls
has no view (:func:`chunk_view` returns None) and its column takes the Arrow
path instead.

:class:`FixedColumn` gathers one column over many chunks. Chunks that lie in
one memory-mapped file, at offsets that are whole rows of the column apart,
are read through one array spanning the file (an *arena*), so a batch over a
file of many record batches is one ``np.take`` per column, not one per chunk.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from ._gather import Runs, take_bits, take_numbers


@dataclass(frozen=True)
class Form:
    """What a fixed-width column's rows are: ``dtype`` values of ``shape`` (booleans: ``bits``)."""

    dtype: np.dtype
    shape: tuple[int, ...]
    bits: bool = False


def form_of(kind: pa.DataType) -> Form | None:
    """The form of a column of type ``kind``, or None when it is not fixed-width."""
    if pa.types.is_boolean(kind):
        return Form(np.dtype(bool), (), bits=True)
    if _is_plain_tensor(kind):
        inner = form_of(kind.storage_type.value_type)
        return None if inner is None or inner.bits else Form(inner.dtype, tuple(kind.shape))
    if pa.types.is_fixed_size_list(kind):
        inner = form_of(kind.value_type)
        return None if inner is None or inner.bits else Form(inner.dtype, (kind.list_size, *inner.shape))
    if pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_timestamp(kind) or pa.types.is_duration(kind):
        return Form(pa.array([], kind).to_numpy(zero_copy_only=True).dtype, ())
    return None


def _is_plain_tensor(kind: pa.DataType) -> bool:
    """A fixed-shape tensor whose rows are stored in their logical (row-major) order."""
    if not isinstance(kind, getattr(pa, "FixedShapeTensorType", ())):
        return False
    permutation = kind.permutation
    return permutation is None or list(permutation) == list(range(len(permutation)))


def chunk_view(array: pa.Array, form: Form) -> Any:
    """``array``'s rows as NumPy without a copy: a ``(rows, *shape)`` view, or for booleans
    ``(bytes, first bit)``; None when the chunk holds a null."""
    if array.null_count:
        return None
    if form.bits:
        return np.frombuffer(array.buffers()[1], dtype=np.uint8), array.offset
    rows = len(array)
    if isinstance(array, pa.ExtensionArray):
        array = array.storage
    while pa.types.is_fixed_size_list(array.type):
        array = array.flatten()  # the values under this level, the slice's offset applied
        if array.null_count:
            return None
    return array.to_numpy(zero_copy_only=True).reshape(rows, *form.shape)


class FixedColumn:
    """One fixed-width column over chunks, gathered with one ``np.take`` per arena touched.

    ``views`` holds each chunk's :func:`chunk_view`; ``backings`` the
    ``pyarrow.Buffer`` of the memory-mapped file each chunk came from (None
    for a chunk in ordinary memory).
    """

    def __init__(self, form: Form, views: list, backings: list) -> None:
        self.form = form
        self.arenas: list[np.ndarray] = []
        self.arena = np.empty(len(views), dtype=np.intp)  # chunk -> its arena
        self.first = np.empty(len(views), dtype=np.int64)  # chunk -> its row 0 in the arena
        spans: dict[int, int] = {}  # id(backing) -> its arena
        for chunk, (view, backing) in enumerate(zip(views, backings)):
            start = self._start_in(view, backing)
            if start is None:
                self.arenas.append(view[0] if form.bits else view)
                self.arena[chunk], self.first[chunk] = len(self.arenas) - 1, view[1] if form.bits else 0
                continue
            if id(backing) not in spans:
                spans[id(backing)] = len(self.arenas)
                self.arenas.append(self._spanning(backing))
            self.arena[chunk], self.first[chunk] = spans[id(backing)], start
        self.layout = self.arena.tobytes()  # columns with equal layouts group a batch's rows alike

    def _start_in(self, view: Any, backing: pa.Buffer | None) -> int | None:
        """The chunk's first row as a row of an array spanning ``backing``, if it is one."""
        if backing is None:
            return None
        data = view[0] if self.form.bits else view
        offset = data.__array_interface__["data"][0] - backing.address
        if offset < 0 or offset + data.nbytes > backing.size:
            return None  # not in the file's memory (a compressed file, decoded elsewhere)
        if self.form.bits:
            return offset * 8 + view[1]
        row = _row_bytes(self.form)
        return offset // row if row and offset % row == 0 else None

    def _spanning(self, backing: pa.Buffer) -> np.ndarray:
        if self.form.bits:
            return np.frombuffer(backing, dtype=np.uint8)
        rows = backing.size // _row_bytes(self.form)
        flat = np.frombuffer(backing, dtype=self.form.dtype, count=rows * int(np.prod(self.form.shape, dtype=np.int64)))
        return flat.reshape(rows, *self.form.shape)

    def gather(self, chunk: np.ndarray, offset: np.ndarray, out: np.ndarray, runs: dict) -> np.ndarray:
        """Rows ``offset`` of chunks ``chunk`` into ``out``; ``runs`` memoises the grouping of
        rows by arena between the columns of one batch (columns over the same files share it)."""
        if len(self.first) == 1:  # one chunk: its offsets, shifted to its place in the arena
            items = offset + self.first[0] if self.first[0] else offset
        else:
            items = self.first[chunk] + offset
        if len(self.arenas) == 1:
            grouped = _ONE
        else:
            grouped = runs.get(self.layout)
            if grouped is None:
                grouped = runs[self.layout] = Runs(self.arena[chunk])
        take = take_bits if self.form.bits else take_numbers
        return take(self.arenas, grouped, items, out)


def _row_bytes(form: Form) -> int:
    return form.dtype.itemsize * int(np.prod(form.shape, dtype=np.int64))


_ONE = Runs(np.zeros(1, dtype=np.intp))  # every row in arena 0
