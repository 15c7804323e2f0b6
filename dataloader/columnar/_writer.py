"""``write_parquet_shards``: a dataset, an iterable of samples or of Arrow tables, as Parquet shards.

The data is read a chunk of rows at a time (a map dataset through
``__getitems__`` where it has one), each chunk made into an Arrow table
column by column (:mod:`._to_arrow`), and the tables cut into row groups
and shards (:mod:`._shard_files`). The first chunk fixes the schema; later
chunks are cast to it, so every shard has the same one.
"""

from __future__ import annotations

import itertools
import os
from typing import Any, Iterable, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs

from .._validate import check_bool, check_choice, check_positive_int
from ..dataset import ArrayDataset, Collated, read_samples
from ..errors import ArgumentTypeError, ArgumentValueError
from ._files import WRITE_IN_PROGRESS
from ._shard_files import ShardWriter, finish_directory, open_directory, prepare_directory, uri_of
from ._to_arrow import Layout, batch_to_table, layout_of, rows_to_table, with_shapes

COMPRESSIONS = ("zstd", "snappy", "lz4", "gzip", "brotli", "none")
# Without explicit sizes, from the first rows' Arrow size: row groups of about 32 MiB (a unit
# ParquetStream shuffles and a ParquetDataset batch decodes whole), shards of about 256 MiB.
GROUP_BYTES = 32 * 2**20
SHARD_BYTES = 256 * 2**20
MAX_GROUP_ROWS = 2**20  # pyarrow's own cap on a row group
_PROBE_ROWS = 64  # rows read first, to size the row groups


def write_parquet_shards(
    data: Any,
    directory: str | os.PathLike,
    rows_per_shard: int | None = None,
    *,
    columns: Sequence[str] | None = None,
    row_group_size: int | None = None,
    compression: str | None = "zstd",
    progress: bool = False,
    filesystem: pafs.FileSystem | None = None,
    overwrite: bool = False,
    metadata: Mapping[str, str] | None = None,
    page_checksums: bool = True,
) -> list[str]:
    """Write ``data`` as ``part-00000.parquet``, ``part-00001.parquet``, ... in ``directory``.

    Args:
        data: a map dataset (``len`` and ``[i]``; read in bulk through ``__getitems__`` when
            it has one), a NumPy array (one row per item), a dict of equal-length columns,
            an iterable of samples (a :class:`~dataloader.StreamDataset`, a generator), or a
            ``pyarrow.Table``/``RecordBatch`` or an iterable of them.
        directory: a local path, a URI (``file:///...``, ``s3://...``) or, with
            ``filesystem``, a path on that filesystem. Created if missing.
        rows_per_shard: rows in each shard but the last. Default: about 256 MiB of Arrow
            data per shard, estimated from the first rows.
        columns: the names of tuple samples' fields (default: a namedtuple's fields, else
            ``col0, col1, ...``); for dict samples and tables, the keys or columns to write,
            in this order (default: all).
        row_group_size: rows per row group. Default: about 32 MiB, at most ``rows_per_shard``.
        compression: one of ``COMPRESSIONS`` (``None`` is ``"none"``).
        progress: show a tqdm bar of rows written (``pip install tqdm``).
        filesystem: a ``pyarrow.fs`` filesystem ``directory`` is a path on.
        overwrite: replace the shards an earlier write left in ``directory``, finished or
            not; without it they are an error.
        metadata: extra ``{key: value}`` strings for the schema metadata.
        page_checksums: write a CRC checksum in every page, so that readers which verify
            them (pyarrow's ``page_checksum_verification=True``) raise on corrupted bytes
            instead of returning wrong values. It costs a few bytes a page and little time.

    Returns:
        The shards' paths, in order (as URIs when ``directory`` was a URI).

    Columns are typed as :mod:`dataloader.columnar._to_arrow` tabulates: numbers keep
    their NumPy width, arrays of one shape become nested ``FixedSizeList`` columns (the
    shape also under ``b"dataloader.shapes"`` in the schema metadata), bytes binary
    columns, strings string columns.

    An empty ``_WRITE_IN_PROGRESS`` file is written in ``directory`` first and deleted
    last, only when every shard is written: while it is there, readers refuse the
    directory as an unfinished dataset. Each shard is written under a temporary name
    and renamed when complete, so an exception (or a killed process) leaves whole
    shards and the marker; an exception also gets a note saying how many shards.
    """
    options = _options(rows_per_shard, row_group_size, compression, progress, overwrite, metadata, page_checksums)
    source = _source(data, _check_columns(columns))
    fs, path, uri = open_directory(directory, filesystem)
    bar = _progress_bar(source.total) if progress else None  # before any work: tqdm may be missing
    try:
        prepare_directory(fs, path, options["overwrite"])
        paths = _write(source, fs, path, options, (rows_per_shard, row_group_size), bar)
        finish_directory(fs, path)  # the very last step: now the shards are the whole dataset
    finally:
        if bar is not None:
            bar.close()
    return [uri_of(p, uri) for p in paths]


def _write(source: Any, fs: pafs.FileSystem, path: str, options: dict, sizes: tuple, bar: Any) -> list[str]:
    """Read ``source`` to its end into shards; ``sizes`` is (rows_per_shard, row_group_size) as given."""
    first = source.read(sizes[1] or _PROBE_ROWS)
    if first is None:
        raise ArgumentValueError("`data` holds no rows; there is nothing to write.")
    schema = with_shapes(first.schema, source.shapes, options["metadata"])
    writer = ShardWriter(
        fs, path, schema, *_sizes(first, *sizes), options["compression"], options["page_checksums"]
    )
    written, table = 0, first
    try:
        while table is not None:
            writer.write(_conform(table, schema, written))
            written += table.num_rows
            if bar is not None:
                bar.update(table.num_rows)
            table = source.read(writer.group_rows)
        return writer.close()
    except BaseException as error:
        writer.abort()
        _note(error, f"write_parquet_shards: {len(writer.paths)} whole shard(s) were written to {path!r} "
                     f"before this error, and no partial one; {WRITE_IN_PROGRESS} stays there, so readers "
                     "refuse the directory; pass overwrite=True to write them again.")
        raise


def _options(
    rows_per_shard: Any,
    row_group_size: Any,
    compression: Any,
    progress: Any,
    overwrite: Any,
    metadata: Any,
    page_checksums: Any,
) -> dict:
    if rows_per_shard is not None:
        check_positive_int("rows_per_shard", rows_per_shard)
    if row_group_size is not None:
        check_positive_int("row_group_size", row_group_size)
    check_bool("progress", progress)
    if metadata is not None and not (
        isinstance(metadata, Mapping) and all(isinstance(x, (str, bytes)) for item in metadata.items() for x in item)
    ):
        raise ArgumentTypeError(f"`metadata` must be a dict of strings to strings; got {metadata!r}.")
    return {
        "compression": check_choice("compression", "none" if compression is None else compression, COMPRESSIONS),
        "overwrite": check_bool("overwrite", overwrite),
        "page_checksums": check_bool("page_checksums", page_checksums),
        "metadata": {_bytes(k): _bytes(v) for k, v in (metadata or {}).items()},
    }


def _bytes(text: str | bytes) -> bytes:
    return text.encode() if isinstance(text, str) else text


def _check_columns(columns: Any) -> list[str] | None:
    if columns is None:
        return None
    if isinstance(columns, str) or not isinstance(columns, Sequence) or not all(isinstance(c, str) for c in columns):
        raise ArgumentTypeError(f"`columns` must be a list of column names; got {columns!r}.")
    if not columns or len(set(columns)) != len(columns):
        raise ArgumentValueError(f"`columns` must name distinct columns, at least one; got {list(columns)}.")
    return list(columns)


def _sizes(first: pa.Table, rows_per_shard: int | None, row_group_size: int | None) -> tuple[int, int]:
    """(rows per shard, rows per row group): as given, or from the first rows' bytes per row."""
    per_row = max(1.0, first.nbytes / max(1, first.num_rows))
    group = row_group_size or int(min(MAX_GROUP_ROWS, max(1, GROUP_BYTES // per_row)))
    if rows_per_shard is None:
        rows_per_shard = max(1, round(SHARD_BYTES / per_row / group)) * group
    return rows_per_shard, min(group, rows_per_shard)


def _conform(table: pa.Table, schema: pa.Schema, start: int) -> pa.Table:
    if table.schema.equals(schema, check_metadata=False):
        return table
    try:
        return table.cast(schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, ValueError) as error:
        raise ArgumentValueError(
            f"samples {start}..{start + table.num_rows - 1} do not fit the columns of the first ones "
            f"({error}); the first rows gave {_describe(schema)}, these {_describe(table.schema)}. "
            "Give every sample the same fields, each of one type (and arrays of one shape)."
        ) from error


def _describe(schema: pa.Schema) -> str:
    return ", ".join(f"{field.name}: {field.type}" for field in schema)


def _note(error: BaseException, note: str) -> None:
    if hasattr(error, "add_note"):  # Python 3.11+
        error.add_note(note)


def _progress_bar(total: int | None) -> Any:
    try:
        from tqdm import tqdm
    except ImportError as error:
        raise ArgumentValueError(
            "`progress=True` needs tqdm, which is not installed: pip install tqdm, or pass progress=False."
        ) from error
    return tqdm(total=total, unit="row", desc="writing Parquet", dynamic_ncols=True)


# -- where the rows come from ------------------------------------------------------------------


class _Rows:
    """Samples read ``count`` at a time as Arrow tables; ``shapes`` holds the N-d columns' shapes."""

    total: int | None = None

    def __init__(self, columns: list[str] | None) -> None:
        self.columns = columns
        self.layout: Layout | None = None
        self.shapes: dict[str, list[int]] = {}
        self.start = 0

    def read(self, count: int) -> pa.Table | None:
        got = self._take(count)
        if got is None:
            return None
        structure = got.batch if isinstance(got, Collated) else got[0]
        self.layout = self.layout or layout_of(structure, self.columns)
        convert = batch_to_table if isinstance(got, Collated) else rows_to_table
        table, shapes = convert(got.batch if isinstance(got, Collated) else got, self.layout, self.start)
        self.shapes = self.shapes or shapes
        self.start += table.num_rows
        return table

    def _take(self, count: int) -> Collated | list | None:
        raise NotImplementedError


class _MapRows(_Rows):
    def __init__(self, data: Any, columns: list[str] | None) -> None:
        super().__init__(columns)
        self.data, self.total = data, len(data)

    def _take(self, count: int) -> Collated | list | None:
        indices = list(range(self.start, min(self.start + count, self.total)))
        return read_samples(self.data, indices) if indices else None


class _IterRows(_Rows):
    def __init__(self, samples: Iterator, columns: list[str] | None) -> None:
        super().__init__(columns)
        self.samples = samples

    def _take(self, count: int) -> list | None:
        return list(itertools.islice(self.samples, count)) or None


class _Tables:
    """Arrow tables or record batches, passed on as they come (the shard writer cuts them)."""

    def __init__(self, tables: Iterable, columns: list[str] | None, total: int | None = None) -> None:
        self.tables, self.columns, self.total = iter(tables), columns, total
        self.shapes: dict[str, list[int]] = {}  # tables carry their own types

    def read(self, count: int) -> pa.Table | None:
        item = next(self.tables, None)
        if item is None:
            return None
        if isinstance(item, pa.RecordBatch):
            item = pa.Table.from_batches([item])
        if not isinstance(item, pa.Table):
            raise ArgumentTypeError(
                f"`data` mixes Arrow tables with {type(item).__name__}; give tables (or record batches) only."
            )
        return item.select(self.columns) if self.columns else item


def _source(data: Any, columns: list[str] | None) -> _Rows | _Tables:
    if isinstance(data, (pa.Table, pa.RecordBatch)):
        return _Tables([data], columns, data.num_rows)
    if isinstance(data, (str, bytes)) or not (hasattr(data, "__iter__") or hasattr(data, "__getitem__")):
        raise ArgumentTypeError(
            "`data` must be a dataset (with __len__ and __getitem__), an iterable of samples, or "
            f"Arrow tables; got {type(data).__name__}."
        )
    if isinstance(data, Mapping):  # columns by name
        names = columns or list(data)
        missing = [name for name in names if name not in data]
        if missing or not names:
            raise ArgumentValueError(
                f"`columns` names {missing}, which `data` lacks; its keys are {list(data)}." if missing
                else "`data` is an empty dict; give it columns (name -> array of the rows' values)."
            )
        return _MapRows(ArrayDataset(*(data[name] for name in names)), names)
    if isinstance(data, np.ndarray):
        return _MapRows(ArrayDataset(data), columns)
    if isinstance(data, (list, tuple)) and data and isinstance(data[0], (pa.Table, pa.RecordBatch)):
        return _Tables(data, columns, sum(t.num_rows for t in data))
    if hasattr(data, "__len__") and hasattr(data, "__getitem__"):
        return _MapRows(data, columns)
    samples = iter(data)
    first = next(samples, _END)
    if isinstance(first, (pa.Table, pa.RecordBatch)):
        return _Tables(itertools.chain([first], samples), columns)
    return _IterRows(itertools.chain([] if first is _END else [first], samples), columns)


_END = object()
