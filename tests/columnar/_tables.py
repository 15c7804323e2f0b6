"""Random Arrow tables for the columnar tests, and the files they are split into.

:func:`tables` draws a table of many column types (integers of every width,
floats, booleans, timestamps, dates, strings, binary, fixed-size and
variable lists), some with nulls, and a ``fill_null`` dict that fills some of
them. :func:`split` cuts rows into uneven pieces; :func:`write_arrow` and
:func:`write_parquet` write pieces as files of record batches / row groups.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import strategies as st

_INTS = {
    "int8": (pa.int8(), -(2**7), 2**7 - 1), "int16": (pa.int16(), -(2**15), 2**15 - 1),
    "int32": (pa.int32(), -(2**31), 2**31 - 1), "int64": (pa.int64(), -(2**63), 2**63 - 1),
    "uint8": (pa.uint8(), 0, 2**8 - 1), "uint16": (pa.uint16(), 0, 2**16 - 1),
    "uint32": (pa.uint32(), 0, 2**32 - 1), "uint64": (pa.uint64(), 0, 2**64 - 1),
}
_FLOAT = st.floats(allow_nan=False, width=32)
_SECONDS = st.integers(0, 2_000_000_000)
_TEXT = st.text(max_size=5)
_BYTES = st.binary(max_size=5)

# kind -> (element strategy, Arrow type, a fill value, may hold nulls)
KINDS: dict[str, tuple[Any, pa.DataType, Any, bool]] = {
    **{name: (st.integers(lo, hi), kind, 7, True) for name, (kind, lo, hi) in _INTS.items()},
    "float16": (st.floats(-1000, 1000, width=16), pa.float16(), 0.5, False),
    "float32": (_FLOAT, pa.float32(), 0.5, True),
    "float64": (st.floats(allow_nan=False), pa.float64(), 0.5, True),
    "bool": (st.booleans(), pa.bool_(), True, True),
    "ts_s": (_SECONDS, pa.timestamp("s"), 0, True),
    "ts_ms": (_SECONDS, pa.timestamp("ms"), 0, False),
    "ts_us": (_SECONDS, pa.timestamp("us"), 0, False),
    "date": (st.integers(0, 20000), pa.date32(), 0, True),
    "string": (_TEXT, pa.string(), "", True),
    "large_string": (_TEXT, pa.large_string(), "", False),
    "binary": (_BYTES, pa.binary(), b"", True),
    "fsl_f32": (st.lists(_FLOAT, min_size=3, max_size=3), pa.list_(pa.float32(), 3), None, False),
    "fsl_i64x2x2": (st.lists(st.lists(st.integers(-5, 5), min_size=2, max_size=2), min_size=2, max_size=2),
                    pa.list_(pa.list_(pa.int64(), 2), 2), None, False),
    "fsl_bool": (st.lists(st.booleans(), min_size=2, max_size=2), pa.list_(pa.bool_(), 2), None, False),
    "list_i64": (st.lists(st.integers(-5, 5), max_size=3), pa.list_(pa.int64()), None, False),
}
PARQUET_KINDS = [k for k in KINDS if k != "large_string"]  # the rest round-trip through Parquet as they are


def _array(values: list, kind: pa.DataType) -> pa.Array:
    if pa.types.is_float16(kind):
        return pa.array(np.array(values, dtype=np.float16), kind)
    if pa.types.is_timestamp(kind) or pa.types.is_date32(kind):
        return pa.array(values, pa.int64() if pa.types.is_timestamp(kind) else pa.int32()).cast(kind)
    return pa.array(values, kind)


@st.composite
def tables(draw, kinds: list[str] = list(KINDS), max_rows: int = 24, nulls: bool = True) -> tuple[pa.Table, dict]:
    """(a table, a fill_null dict for some of its null-holding columns) with 0..max_rows rows."""
    rows = draw(st.integers(0, max_rows))
    chosen = draw(st.lists(st.sampled_from(kinds), min_size=1, max_size=5))
    columns, fill = {}, {}
    for number, kind in enumerate(chosen):
        element, arrow_type, fill_value, nullable = KINDS[kind]
        values = draw(st.lists(element, min_size=rows, max_size=rows))
        if nulls and nullable and rows and draw(st.booleans()):
            mask = draw(st.lists(st.booleans(), min_size=rows, max_size=rows))
            values = [None if m else v for v, m in zip(values, mask)]
            if draw(st.integers(0, 5)):  # mostly filled: an unfilled one ends the test at the error
                fill[f"{kind}_{number}"] = fill_value
        columns[f"{kind}_{number}"] = _with_nulls(values, arrow_type) if None in values else _array(values, arrow_type)
    return pa.table(columns), fill


def _with_nulls(values: list, kind: pa.DataType) -> pa.Array:
    present = [v for v in values if v is not None]
    filled = _array(present, kind).to_pylist()
    it = iter(filled)
    return pa.array([None if v is None else next(it) for v in values], kind)


def has_unfilled_nulls(table: pa.Table, fill: dict) -> list[str]:
    return [name for name in table.column_names if table.column(name).null_count and name not in fill]


def expected_rows(table: pa.Table, fill: dict) -> list[dict]:
    """``table.to_pylist()`` with the nulls of the filled columns replaced by their fill value."""
    filled = {
        name: table.column(name).fill_null(pa.scalar(fill[name], table.schema.field(name).type))
        if name in fill else table.column(name)
        for name in table.column_names
    }
    return pa.table(filled).to_pylist()


def python(value: Any) -> Any:
    """A dataset's value as the Python value ``to_pylist`` gives."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def python_row(row: dict) -> dict:
    return {name: python(value) for name, value in row.items()}


@st.composite
def cuts(draw, rows: int, max_pieces: int = 5) -> list[int]:
    """Uneven piece sizes summing to ``rows`` (some may be 0)."""
    points = sorted(draw(st.lists(st.integers(0, rows), max_size=max_pieces - 1)))
    bounds = [0, *points, rows]
    return [b - a for a, b in zip(bounds, bounds[1:])]


def split(table: pa.Table, sizes: list[int]) -> list[pa.Table]:
    out, start = [], 0
    for size in sizes:
        out.append(table.slice(start, size))
        start += size
    return out


def write_arrow(directory: Path, files: list[list[pa.Table]], compression: str | None = None) -> list[str]:
    """One IPC file per entry of ``files``, one record batch per table in it."""
    paths = []
    for number, pieces in enumerate(files):
        path = directory / f"part-{number:02d}.arrow"
        options = pa.ipc.IpcWriteOptions(compression=compression)
        with pa.ipc.new_file(path, pieces[0].schema, options=options) as writer:
            for piece in pieces:
                batch = piece.combine_chunks().to_batches()
                writer.write_batch(batch[0] if batch else pa.RecordBatch.from_pylist([], schema=piece.schema))
        paths.append(str(path))
    return paths


def write_parquet(directory: Path, files: list[list[pa.Table]], **options: Any) -> list[str]:
    """One Parquet file per entry of ``files``, one row group per non-empty table in it."""
    paths = []
    for number, pieces in enumerate(files):
        path = directory / f"part-{number:02d}.parquet"
        with pq.ParquetWriter(path, pieces[0].schema, **options) as writer:
            for piece in pieces:
                if piece.num_rows:
                    writer.write_table(piece, row_group_size=piece.num_rows)
        paths.append(str(path))
    return paths


@st.composite
def layouts(draw, rows: int) -> list[list[int]]:
    """Rows cut into 1..3 files, each cut into pieces (record batches, row groups)."""
    per_file = draw(cuts(rows, max_pieces=3))
    return [draw(cuts(size, max_pieces=4)) for size in per_file]


def cut_table(table: pa.Table, layout: list[list[int]]) -> list[list[pa.Table]]:
    files, start = [], 0
    for sizes in layout:
        files.append(split(table.slice(start, sum(sizes)), sizes))
        start += sum(sizes)
    return files



def sample_table(rows: int = 40, blob: bool = True) -> pa.Table:
    """A small table of every common column kind, row ``i`` derived from ``i``."""
    ids = np.arange(rows, dtype=np.int64)
    columns = {
        "id": ids,
        "x": (ids * 0.25).astype(np.float32),
        "flag": ids % 3 == 0,
        "name": [f"row{i}" for i in ids],
        "blob": [bytes([i % 256]) * (i % 4) for i in ids],
        "vec": pa.FixedSizeListArray.from_arrays(pa.array(np.repeat(ids, 2).astype(np.int16)), 2),
    }
    if not blob:
        del columns["blob"]
    return pa.table(columns)


def assert_bulk_matches_rows(dataset: Any, indices: list[int]) -> None:
    """``__getitems__(indices)`` holds the rows ``dataset[i]`` hold, and for every column the
    collator stacks, equals collating them in values, dtypes and shapes."""
    from dataloader import Collated, Collator

    bulk = dataset.__getitems__(indices)
    assert isinstance(bulk, Collated) and bulk.size == len(indices)
    batch, rows = bulk.batch, [dataset[i] for i in indices]
    assert list(batch) == dataset.columns
    for name, column in batch.items():
        assert len(column) == len(indices), name
        values = column.to_pylist() if isinstance(column, pa.Array) else [python(v) for v in column]
        assert values == [python(row[name]) for row in rows], name
    assert [python_row(row) for row in bulk.rows()] == [python_row(row) for row in rows]
    stackable = [name for name, column in batch.items() if isinstance(column, np.ndarray) and column.dtype != object]
    if indices and stackable:
        collated = Collator().apply([{name: row[name] for name in stackable} for row in rows])
        for name in stackable:
            got, want = batch[name], collated[name]
            assert (got.dtype, got.shape) == (want.dtype, want.shape), name
            np.testing.assert_array_equal(got, want)
