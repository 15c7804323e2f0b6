"""What :class:`ArrowDataset` and :class:`ParquetDataset` share: their options, indexing, rows.

A :class:`TableDataset` answers ``dataset[i]`` and ``__getitems__(indices)``
by gathering rows into a batch (its ``_gather``); a row is that batch's
row, so a sample and a bulk batch never disagree. A :class:`Plan` says which
columns are gathered with NumPy (fixed-width, :mod:`._fixed`) and which go
through Arrow and :mod:`._convert`.
"""

from __future__ import annotations

import functools
import operator
from typing import Any, Callable, Mapping

import numpy as np
import pyarrow as pa

from ..dataset import Collated, Dataset, batch_array
from ..errors import ArgumentTypeError, ArgumentValueError, DataLoaderError
from ._convert import column_to_array, fill_for, fill_scalar
from ._fixed import Form
from ._gather import positions

Allocate = Callable[[tuple, Any], np.ndarray]


class Plan:
    """The columns of a dataset's batches, in order: ``fixed`` ones (name -> :class:`Form`) come
    from NumPy gathers, the others (``general``) from Arrow rows through :func:`column_to_array`."""

    def __init__(self, schema: pa.Schema, strings: str, fill_null: Any, fixed: dict[str, Form]) -> None:
        self.schema = schema
        self.names = list(schema.names)
        self.strings = strings
        self.fill_null = fill_null
        self.fixed = fixed
        self.general = [name for name in self.names if name not in fixed]

    def allocate(self, name: str, rows: int, allocate: Allocate) -> np.ndarray:
        form = self.fixed[name]
        return allocate((rows, *form.shape), form.dtype)

    def convert(self, table: pa.Table) -> dict[str, Any]:
        """The general columns of ``table`` as the batch holds them."""
        return {
            name: column_to_array(table.column(name), name, self.strings, fill_for(self.fill_null, name))
            for name in self.general
        }

    def empty(self, allocate: Allocate) -> dict[str, Any]:
        fixed = {name: self.allocate(name, 0, allocate) for name in self.fixed}
        return self.ordered({**fixed, **self.convert(self.schema.empty_table())})

    def ordered(self, arrays: dict[str, Any]) -> dict[str, Any]:
        return {name: arrays[name] for name in self.names}


class TableDataset(Dataset):
    """A map-style dataset over columnar rows; subclasses set ``plan`` and ``_length`` and
    define ``_gather(rows, allocate)``, the batch of rows ``rows`` (int64, in range)."""

    kind = "TableDataset"
    plan: Plan
    _length: int

    def __len__(self) -> int:
        return self._length

    @property
    def columns(self) -> list[str]:
        """The columns of each row and batch, in order."""
        return list(self.plan.names)

    def __getitem__(self, index: int) -> dict[str, Any]:
        """Row ``index`` as ``{column: value}``: NumPy scalars and arrays, ``str``, ``bytes``."""
        rows = positions([operator.index(index)], self._length, self.kind)
        return row_of(self._batch(rows, np.empty), 0)

    def __getitems__(self, indices: Any) -> Collated:
        """The rows at ``indices`` as one batch, ``{column: array}``, gathered column by column."""
        rows = positions(indices, self._length, self.kind)
        batch = self._batch(rows, batch_array)
        return Collated(batch, len(rows), rows=functools.partial(rows_of, batch))

    def _batch(self, rows: np.ndarray, allocate: Allocate) -> dict[str, Any]:
        if not len(rows):
            return self.plan.empty(allocate)
        return self._gather(rows, allocate)

    def _gather(self, rows: np.ndarray, allocate: Allocate) -> dict[str, Any]:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{self.kind}({self._length} rows, columns={self.plan.names})"


def row_of(batch: Mapping[str, Any], index: int) -> dict[str, Any]:
    """Row ``index`` of a batch; an Arrow array's value (``strings="arrow"``) as Python's."""
    return {
        name: column[index] if isinstance(column, np.ndarray) else column[index].as_py()
        for name, column in batch.items()
    }


def rows_of(batch: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every row of a batch (what ``Collated.rows()`` returns)."""
    columns = {name: c if isinstance(c, np.ndarray) else c.to_pylist() for name, c in batch.items()}
    size = len(next(iter(columns.values()))) if columns else 0
    return [{name: column[i] for name, column in columns.items()} for i in range(size)]


def check_columns(columns: Any, names: list[str], where: str) -> list[str]:
    """``columns`` (None: all of ``names``) after checking it names distinct columns of ``where``."""
    if columns is None:
        return list(names)
    if isinstance(columns, str) or not isinstance(columns, (list, tuple)) or not all(isinstance(c, str) for c in columns):
        raise ArgumentTypeError(f"`columns` must be a list of column names; got {columns!r}.")
    if not columns:
        raise ArgumentValueError("`columns` must name at least one column; got an empty list. Pass None for all.")
    for name in columns:
        if name not in names:
            raise ArgumentValueError(f"`columns` names {name!r}, which is not a column of {where}; its columns are {names}.")
    for name in columns:
        if columns.count(name) > 1:
            raise ArgumentValueError(f"`columns` names {name!r} twice; name each column once.")
    return list(columns)


def check_fill_null(fill_null: Any, schema: pa.Schema, nulls: Mapping[str, int], where: str) -> Any:
    """``fill_null`` after checking that a dict names columns of ``schema`` and that each value
    fits its column's type (a single value: the columns known to hold nulls)."""
    if isinstance(fill_null, dict):
        for name in fill_null:
            if name not in schema.names:
                raise ArgumentValueError(
                    f"`fill_null` names {name!r}, which is not a column of {where}; its columns are {schema.names}."
                )
        wanted = {name: value for name, value in fill_null.items() if value is not None}
    else:
        wanted = {name: fill_null for name, count in nulls.items() if count and fill_null is not None}
    for name, value in wanted.items():
        kind = schema.field(name).type
        fill_scalar(value, kind.value_type if pa.types.is_dictionary(kind) else kind, name)  # filled after decoding
    return fill_null


def check_nulls(nulls: Mapping[str, int], fill_null: Any, kind: str) -> None:
    """Raise for the first column that holds nulls and has no fill value."""
    for name, count in nulls.items():
        if count and fill_for(fill_null, name) is None:
            raise DataLoaderError(
                f"column {name!r} has {count} null value(s), which a NumPy batch cannot hold, so "
                f"{kind} cannot read it as it is. Pass fill_null={{{name!r}: value}} to fill them, "
                "or drop the nulls when writing the data."
            )


def check_same_columns(
    first: pa.Schema, other: pa.Schema, names: list[str] | None, paths: tuple[str, str], kind: str
) -> None:
    """Raise unless ``other`` has the columns ``names`` (None: all of them, no more, no fewer) with
    the types ``first`` has. The order does not matter: columns are read by name."""
    mine = [f"{f.name}: {f.type}" for f in other if names is None or f.name in names]
    want = [f"{f.name}: {f.type}" for f in first if names is None or f.name in names]
    if sorted(mine) != sorted(want):
        raise ArgumentValueError(
            f"{paths[1]!r} has columns {mine}, but {paths[0]!r} has {want}; every file given to "
            f"{kind} needs the same columns and types. Pick the common columns with columns=[...], or "
            "rewrite the files with one schema."
        )
