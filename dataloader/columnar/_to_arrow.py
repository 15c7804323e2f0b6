"""Samples to Arrow tables, a chunk of rows at a time: how the Parquet writer types each column.

==========================================  ===============================================
a field's values                            its column
==========================================  ===============================================
Python or NumPy numbers, booleans           the NumPy dtype's width (``np.int32`` stays
                                            int32; Python ints and floats are 64-bit)
NumPy arrays of one shape ``S``             ``FixedSizeList`` nested ``len(S)`` deep over the
                                            arrays' dtype, ``S`` in the schema metadata
``bytes``, ``bytearray``, ``memoryview``    ``binary``
``str``                                     ``string``
anything else (lists, dicts, ``None``)      what ``pyarrow.array`` infers
==========================================  ===============================================

A sample is a tuple (fields named by ``columns``, else a namedtuple's
fields, else ``col0, col1, ...``), a dict (its keys) or one value (one
column). A batch a dataset collated itself (:class:`~dataloader.Collated`,
from ``__getitems__``) has the same structure with a column in place of
each field, and an ``(rows, *S)`` NumPy column becomes the nested
``FixedSizeList`` without one Python object per row.
"""

from __future__ import annotations

import json
import numbers
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from ..errors import ArgumentTypeError, ArgumentValueError

#: Schema metadata key of ``{column: [d0, d1, ...]}``, the row shape of N-d array columns.
SHAPES_KEY = b"dataloader.shapes"

_FIXED_KINDS = "biufmM"  # NumPy kinds Arrow stores as fixed-width values
_ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError, TypeError, ValueError)


@dataclass(frozen=True)
class Layout:
    """Where each column's values are in a sample: ``keys`` (tuple positions or dict keys),
    or ``keys=None`` for samples that are one value."""

    kind: str  # "tuple", "dict" or "value"
    names: tuple[str, ...]
    keys: tuple | None


def layout_of(sample: Any, columns: Sequence[str] | None) -> Layout:
    """The layout of ``sample`` (the first one; the others must match it)."""
    if isinstance(sample, tuple):
        names = columns or getattr(type(sample), "_fields", None) or [f"col{i}" for i in range(len(sample))]
        if len(names) != len(sample):
            raise ArgumentValueError(
                f"`columns` names {len(names)} column(s) {list(names)}, but the samples are tuples of "
                f"{len(sample)} fields; give one name per field."
            )
        return Layout("tuple", tuple(names), tuple(range(len(sample))))
    if isinstance(sample, dict):
        odd = [key for key in sample if not isinstance(key, str)]
        if odd:
            raise ArgumentTypeError(f"sample dicts need string keys, which name the columns; got {odd[0]!r}.")
        keys = tuple(columns or sample)
        return Layout("dict", keys, keys)
    if columns is not None and len(columns) != 1:
        raise ArgumentValueError(
            f"`columns` names {len(columns)} columns, but each sample is one {type(sample).__name__}, "
            "which makes one column; give one name."
        )
    return Layout("value", tuple(columns or ["col0"]), None)


def rows_to_table(rows: list, layout: Layout, start: int) -> tuple[pa.Table, dict[str, list[int]]]:
    """The table of ``rows`` (samples ``start, start + 1, ...``) and the N-d columns' row shapes."""
    if layout.keys is None:
        return _table({layout.names[0]: rows}, start)
    for offset, row in enumerate(rows):
        _check_row(row, layout, start + offset)
    return _table({name: [row[key] for row in rows] for name, key in zip(layout.names, layout.keys)}, start)


def batch_to_table(batch: Any, layout: Layout, start: int) -> tuple[pa.Table, dict[str, list[int]]]:
    """The table of a batch a dataset collated itself: one column per field of ``layout``."""
    if layout.keys is None:
        return _table({layout.names[0]: batch}, start)
    if layout.kind == "dict" and any(key not in batch for key in layout.keys):
        raise ArgumentValueError(
            f"the dataset's batch of samples {start}.. has the keys {list(batch)}, but the columns are "
            f"{list(layout.keys)}; pass columns=[...] naming keys it has."
        )
    return _table({name: batch[key] for name, key in zip(layout.names, layout.keys)}, start)


def _check_row(row: Any, layout: Layout, index: int) -> None:
    if layout.kind == "tuple" and (not isinstance(row, tuple) or len(row) != len(layout.keys)):
        got = f"a tuple of {len(row)} fields" if isinstance(row, tuple) else f"a {type(row).__name__}"
        raise ArgumentValueError(
            f"sample {index} is {got}, but the first sample is a tuple of {len(layout.keys)} "
            f"({', '.join(layout.names)}); every sample needs the same fields."
        )
    if layout.kind == "dict" and (not isinstance(row, dict) or any(key not in row for key in layout.keys)):
        got = f"has the keys {list(row)}" if isinstance(row, dict) else f"is a {type(row).__name__}"
        raise ArgumentValueError(
            f"sample {index} {got}, but the columns are {list(layout.keys)}; every sample needs "
            "those keys (pass columns=[...] to write some of them)."
        )


def _table(columns: dict[str, Any], start: int) -> tuple[pa.Table, dict[str, list[int]]]:
    arrays, shapes = {}, {}
    for name, values in columns.items():
        arrays[name], shape = to_arrow(values, name, start)
        if shape:
            shapes[name] = list(shape)
    return pa.table(arrays), shapes


def to_arrow(values: Any, name: str, start: int) -> tuple[pa.Array | pa.ChunkedArray, tuple[int, ...]]:
    """One column's values (a NumPy column, an Arrow array, or a list of the rows' values) as
    Arrow, and the row shape of an N-d array column (``()`` for the others)."""
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return values, ()
    if isinstance(values, np.ndarray) and values.dtype.kind in _FIXED_KINDS and values.ndim:
        return _checked(_fixed, values, name, start), values.shape[1:]
    values = list(values)
    if values and all(isinstance(v, np.ndarray) and v.ndim for v in values):
        shape = _one_shape(values, name, start)
        stacked = np.stack(values)
        if stacked.dtype.kind in _FIXED_KINDS:
            return _checked(_fixed, stacked, name, start), shape
    elif values and all(_is_number(v) for v in values):
        return _checked(_fixed, np.asarray(values), name, start), ()
    return _checked(_generic, values, name, start), ()


def _fixed(array: np.ndarray) -> pa.Array:
    """``(rows, *shape)`` as a ``FixedSizeList`` nested ``len(shape)`` deep (a flat column for 1-d)."""
    column = pa.array(np.ascontiguousarray(array).reshape(-1))
    for size in reversed(array.shape[1:]):
        column = pa.FixedSizeListArray.from_arrays(column, size)
    return column


def _generic(values: list) -> pa.Array | pa.ChunkedArray:
    first = next((v for v in values if v is not None), None)
    if isinstance(first, (bytes, bytearray, memoryview)):
        return pa.array([bytes(v) if isinstance(v, memoryview) else v for v in values], type=pa.binary())
    return pa.array(values, type=pa.string() if isinstance(first, str) else None)


def _checked(make: Any, values: Any, name: str, start: int) -> Any:
    try:
        return make(values)
    except _ARROW_ERRORS as error:
        raise ArgumentValueError(
            f"column {name!r}: pyarrow cannot make one column of samples {start}..{start + len(values) - 1} "
            f"({type(error).__name__}: {error}). Give the field one type in every sample: numbers, "
            "bytes, str, or NumPy arrays of one shape."
        ) from error


def _one_shape(values: list, name: str, start: int) -> tuple[int, ...]:
    shape = values[0].shape
    for offset, value in enumerate(values):
        if value.shape != shape:
            raise ArgumentValueError(
                f"column {name!r} holds arrays of shape {shape} (sample {start}) and {value.shape} "
                f"(sample {start + offset}); a fixed-shape column needs one shape. Pad or crop them to "
                "one shape, or give 1-d rows as lists (array.tolist()) for a variable-length list column."
            )
    return shape


def _is_number(value: Any) -> bool:
    if isinstance(value, np.ndarray):
        return value.ndim == 0 and value.dtype.kind in _FIXED_KINDS
    return isinstance(value, (numbers.Number, np.number, np.bool_))


def with_shapes(schema: pa.Schema, shapes: dict[str, list[int]], metadata: dict[bytes, bytes]) -> pa.Schema:
    """``schema`` with ``metadata`` and the N-d columns' shapes (under :data:`SHAPES_KEY`) added."""
    merged = dict(schema.metadata or {})
    merged.update(metadata)
    if shapes:
        merged[SHAPES_KEY] = json.dumps(shapes).encode()
    return schema.with_metadata(merged)


def fixed_shapes(schema: pa.Schema) -> dict[str, tuple[int, ...]]:
    """``{column: row shape}`` of the N-d array columns a Parquet writer recorded in ``schema``."""
    recorded = (schema.metadata or {}).get(SHAPES_KEY)
    return {name: tuple(shape) for name, shape in json.loads(recorded).items()} if recorded else {}
