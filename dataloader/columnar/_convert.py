"""Arrow columns to NumPy batches: the one place that decides how each Arrow type comes out.

==========================================  ===============================================
Arrow type                                  comes out as
==========================================  ===============================================
integers, floats, bool, temporal            a NumPy array (a view where Arrow's buffer allows)
``FixedSizeList`` (nested) of those         an N-d array ``(rows, size, ...)``
fixed-shape tensor extension                an N-d array ``(rows, *shape)``
strings, binary                             an object array of ``str``/``bytes``, or the
                                            Arrow array itself with ``strings="arrow"``
anything else (variable lists, structs)     an object array of the rows' Python values
==========================================  ===============================================

Nulls are a :class:`~dataloader.errors.DataLoaderError` that names the
column, unless a fill value is given for it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from .._validate import check_choice
from ..errors import ArgumentValueError, DataLoaderError

STRINGS = ("object", "arrow")


def table_to_batch(table: pa.Table, strings: str = "object", fill_null: Any = None) -> dict[str, Any]:
    """``{column name: array}`` for every column of ``table`` (see the module's table).

    ``fill_null`` is one value for every column, or a ``{column: value}`` dict.
    """
    return {
        name: column_to_array(table.column(name), name, strings, fill_for(fill_null, name))
        for name in table.column_names
    }


def column_to_array(column: pa.ChunkedArray | pa.Array, name: str, strings: str = "object", fill: Any = None) -> Any:
    """One column as the module's table says; ``name`` is for the error messages."""
    check_choice("strings", strings, STRINGS)
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if pa.types.is_dictionary(array.type):  # first, so a fill value is one of the values' type
        array = array.dictionary_decode()
    if array.null_count:
        if fill is None:
            raise DataLoaderError(
                f"column {name!r} has {array.null_count} null value(s) in this batch; pass "
                f"fill_null={{{name!r}: value}} to fill them, or drop the nulls when writing the data."
            )
        array = array.fill_null(fill_scalar(fill, array.type, name))
    kind = array.type
    if isinstance(kind, pa.BaseExtensionType) and hasattr(array, "to_numpy_ndarray"):
        return array.to_numpy_ndarray()
    if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        return array if strings == "arrow" else array.to_numpy(zero_copy_only=False)
    if pa.types.is_fixed_size_list(kind):
        return _fixed_size_list(array, name, strings)
    if pa.types.is_primitive(kind):
        return array.to_numpy(zero_copy_only=False)
    return _objects(array.to_pylist())


def _fixed_size_list(array: pa.FixedSizeListArray, name: str, strings: str) -> Any:
    """Rows of equal-length lists as one N-d array: the flattened values, reshaped."""
    values = column_to_array(array.flatten(), name, strings)
    if not isinstance(values, np.ndarray) or values.dtype == object:
        return _objects(array.to_pylist())
    return values.reshape(len(array), array.type.list_size, *values.shape[1:])


def _objects(values: list) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def fill_scalar(value: Any, kind: pa.DataType, name: str) -> pa.Scalar:
    """``value`` as a scalar of column ``name``'s type ``kind``, or the error that says it cannot be."""
    try:
        return pa.scalar(value, type=kind)
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as error:
        raise ArgumentValueError(
            f"`fill_null` gives {value!r} for column {name!r}, whose type {kind} cannot hold it "
            f"({error}). Give a value of the column's type, or fill_null={{column: value}} per column."
        ) from error


def fill_for(fill_null: Any, name: str) -> Any:
    """The fill value for column ``name``: ``fill_null`` itself, or its entry for ``name``."""
    if isinstance(fill_null, dict):
        return fill_null.get(name)
    return fill_null
