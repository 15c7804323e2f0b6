"""``ArrowDataset``: random access over an Arrow table or memory-mapped Arrow IPC files."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs

from .._digest import digest
from .._remote import RETRIES, ShardCache, access_from, is_remote
from .._validate import check_choice
from ..errors import ArgumentTypeError, ArgumentValueError, DataLoaderError
from ._convert import STRINGS
from ._files import ARROW_SUFFIXES, files_fingerprint, resolve_files
from ._fixed import FixedColumn, chunk_view, form_of
from ._gather import Runs, locate, take_rows
from ._snapshot import Stamp, check_stamp, parsing, stamps_fingerprint, take_stamps
from ._table_dataset import Allocate, Plan, TableDataset, check_columns, check_fill_null, check_nulls, check_same_columns


class ArrowDataset(TableDataset):
    """Rows of an Arrow table, or of Arrow IPC (Feather) files, by index: a map-style Dataset.

    ``source`` is a ``pyarrow.Table`` (or ``RecordBatch``), or Arrow IPC files
    in the file format (``.arrow``, ``.feather``, ``.ipc``): a path, a URI, a
    directory (its files, recursively, sorted) or a list of them, on
    ``filesystem`` if one is given. Local files are memory-mapped and their
    record batches used where they lie: building the dataset reads no data,
    and the rows a batch needs are the only ones the OS pages in. Files on
    other filesystems, and compressed files (``write_feather`` compresses
    with LZ4 unless told ``compression="uncompressed"``), are read or
    decompressed into memory when the dataset is built, and again by each
    worker started with ``spawn``: write uncompressed local files for data
    larger than memory.

    ``dataset[i]`` is row ``i`` as ``{column: value}``; ``columns`` picks and
    orders the columns. Values are as ``__getitems__`` gives them for that
    row: numbers as NumPy scalars, fixed-size lists and fixed-shape tensors as
    arrays, strings and binary as ``str``/``bytes``, anything else as Python
    values. ``__getitems__(indices)``, which the loader calls once per batch,
    returns the whole batch as ``{column: array}``: numbers, booleans and
    timestamps as NumPy arrays, fixed-size lists and fixed-shape tensors as
    N-d arrays, strings and binary as object arrays of ``str``/``bytes``
    (Arrow arrays with ``strings="arrow"``), anything else as object arrays
    of Python values. A null is an error naming its
    column when the dataset is built, unless ``fill_null`` (one value, or
    ``{column: value}``) fills it.

    Speed: fixed-width columns without nulls (numbers, booleans, timestamps,
    fixed-size lists, tensors) are gathered by NumPy straight from the
    memory map into the batch (in a worker, into the shared memory it
    travels in): one ``np.take`` per column per file touched, no Python step
    per row. Other columns are taken with Arrow and converted.

    The dataset pickles as its paths (a table: as the table), and a worker
    maps the files again, so it works with every start method. Each file's
    size, modification time and (local files) inode are recorded when the
    dataset is built and checked at every mapping: a file replaced since is a
    :class:`~dataloader.SourceChangedError`, never another file's rows.

    Remote files: ``retries`` and ``cache_dir``/``cache_limit`` work as in
    :class:`ParquetStream`; with a cache every process maps the local copies
    instead of reading the files into memory.

    Example::

        dataset = ArrowDataset("train.arrow", columns=["image", "label"])
        loader = DataLoader(dataset, RandomSampler(dataset, batch_size=256), num_workers=4)
    """

    kind = "ArrowDataset"

    def __init__(
        self, source: Any, *, columns: Any = None, strings: str = "object", fill_null: Any = None,
        filesystem: Any = None, retries: int = RETRIES, cache_dir: Any = None, cache_limit: int | None = None,
    ) -> None:
        self._strings = check_choice("strings", strings, STRINGS)
        access = access_from(retries, None, cache_dir, cache_limit)
        self._columns_given, self._fill_given = columns, fill_null
        self._table: pa.Table | None = None
        self._files: tuple[pafs.FileSystem, list[str]] | None = None
        self._file_cache: ShardCache | None = None
        self._stamps: list[Stamp] = []
        if isinstance(source, (pa.Table, pa.RecordBatch)):
            if filesystem is not None:
                raise ArgumentValueError(
                    "`filesystem` applies to files, and `source` is an in-memory table. Drop "
                    "filesystem, or give the files' paths as source."
                )
            self._table = source if isinstance(source, pa.Table) else pa.Table.from_batches([source])
        elif isinstance(source, (str, os.PathLike, list, tuple)):
            self._files = resolve_files(source, ARROW_SUFFIXES, filesystem, what="source", access=access)
            self._file_cache = access.cache_for(self._files[0])
            self._stamps = take_stamps(*self._files, self.kind)  # checked at every build, in every process
        else:
            raise ArgumentTypeError(
                f"`source` must be a pyarrow.Table, a path, a URI or a list of them; got {type(source).__name__}."
            )
        self._build()

    def _build(self) -> None:
        """Open the source, check the options against it, and index its chunks."""
        parts = self._parts()
        where = "the table" if self._table is not None else "the files"
        schema = parts[0][1]
        names = check_columns(self._columns_given, schema.names, where)
        for path, other, _, _ in parts[1:]:
            chosen = None if self._columns_given is None else names
            check_same_columns(schema, other, chosen, (parts[0][0], path), self.kind)
        selected = pa.schema([schema.field(name) for name in names])
        chunks, backings = _chunks(parts, selected)
        nulls = {name: sum(chunk.column(name).null_count for chunk in chunks) for name in names}
        fill_null = check_fill_null(self._fill_given, schema, nulls, where)
        check_nulls(nulls, fill_null, self.kind)
        self._fixed = _fixed_columns(chunks, backings, names, nulls)
        self.plan = Plan(selected, self._strings, fill_null, {name: c.form for name, c in self._fixed.items()})
        general = self.plan.general
        self._general = [pa.Table.from_batches([chunk]).select(general) for chunk in chunks] if general else []
        sizes = np.array([chunk.num_rows for chunk in chunks], dtype=np.int64)
        self._starts = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64) if len(sizes) else sizes
        self._length = int(sizes.sum())

    def _parts(self) -> list[tuple[str, pa.Schema, list[pa.RecordBatch], pa.Buffer | None]]:
        """(path, schema, record batches, the mapped file or None) for the table or each file."""
        if self._table is not None:
            return [("<table>", self._table.schema, self._table.to_batches(), None)]
        filesystem, paths = self._files  # type: ignore[misc]
        parts = []
        for path, stamp in zip(paths, self._stamps):
            if self._file_cache is not None:  # the local copy of that version, mapped
                copy = self._file_cache.fetch(
                    filesystem, path, stamp.size, stamp.version, lambda: check_stamp(filesystem, path, stamp, self.kind)
                )
                parts.append((path, *_read_ipc(pafs.LocalFileSystem(), copy.path)))
                continue
            local = not is_remote(filesystem)  # a remote file that does not parse is read again
            parts.append((path, *parsing(lambda: _read_ipc(filesystem, path, local), filesystem, repr(path))))  # noqa: B023
            check_stamp(filesystem, path, stamp, self.kind)  # after the read: what was read is checked
        return parts

    def _gather(self, rows: np.ndarray, allocate: Allocate) -> dict[str, Any]:
        chunk, offset = locate(rows, self._starts)
        arrays: dict[str, Any] = {}
        runs: dict = {}
        for name, column in self._fixed.items():
            arrays[name] = column.gather(chunk, offset, self.plan.allocate(name, len(rows), allocate), runs)
        if self.plan.general:
            arrays.update(self.plan.convert(take_rows(self._general, Runs(chunk), offset)))
        return self.plan.ordered(arrays)

    def order_fingerprint(self) -> dict[str, Any] | None:
        """Which rows the indices mean, for a loader's resume state: the files, their content
        (sizes, times, versions) and record batches; None for an in-memory table (its length says it)."""
        if self._files is None:
            return None
        return {
            "kind": type(self).__name__,
            "files": files_fingerprint(self._files[1]),
            "stamps": stamps_fingerprint(self._stamps),
            "batches": f"{len(self._starts)} record batches, {digest(self._starts.tolist())}",
        }

    def __getstate__(self) -> dict:
        # Paths and options, not buffers: the worker maps the files itself.
        keep = ("_strings", "_columns_given", "_fill_given", "_table", "_files", "_stamps", "_file_cache")
        return {key: self.__dict__[key] for key in keep}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._build()


def _chunks(parts: list, selected: pa.Schema) -> tuple[list[pa.RecordBatch], list]:
    """Every non-empty record batch of ``parts``, its columns ``selected``, and its file's mapping."""
    chunks, backings = [], []
    for _, _, batches, backing in parts:
        for batch in batches:
            if batch.num_rows:  # an empty chunk owns no row: locate() relies on it
                columns = [batch.column(name) for name in selected.names]
                chunks.append(pa.RecordBatch.from_arrays(columns, schema=selected))
                backings.append(backing)
    return chunks, backings


def _fixed_columns(chunks: list[pa.RecordBatch], backings: list, names: list[str], nulls: dict) -> dict[str, FixedColumn]:
    """The columns NumPy can gather: fixed-width, without nulls, viewable in every chunk."""
    fixed = {}
    for name in names:
        form = form_of(chunks[0].schema.field(name).type) if chunks else None
        if form is None or nulls[name]:
            continue
        views = [chunk_view(chunk.column(name), form) for chunk in chunks]
        if all(view is not None for view in views):
            fixed[name] = FixedColumn(form, views, backings)
    return fixed


def _read_ipc(
    filesystem: pafs.FileSystem, path: str, parsed: bool = True
) -> tuple[pa.Schema, list[pa.RecordBatch], pa.Buffer | None]:
    """A file's schema, its record batches, and (memory-mapped local files) the whole mapping.

    The file is closed before returning: the batches keep the mapping alive,
    and a dataset of many files holds no file descriptor open.
    """
    local = isinstance(filesystem, pafs.LocalFileSystem)
    try:
        source = pa.memory_map(path, "r") if local else filesystem.open_input_file(path)
    except DataLoaderError:
        raise  # a RemoteReadError (denied, or the store kept failing): not a question of format
    except OSError as error:
        raise ArgumentValueError(f"cannot open {path!r} ({error}).") from error
    try:
        reader = pa.ipc.open_file(source)
        batches = [reader.get_batch(i) for i in range(reader.num_record_batches)]
        backing = None
        if local:
            source.seek(0)
            backing = source.read_buffer(source.size())  # no copy: a view of the mapping
        return reader.schema, batches, backing
    except pa.ArrowInvalid as error:
        if not parsed:
            raise  # read again by the caller (a remote file's body may have come short)
        raise ArgumentValueError(
            f"cannot read {path!r} as an Arrow IPC file ({error}). ArrowDataset reads the IPC file "
            "format (pyarrow.feather.write_feather, pyarrow.ipc.new_file); rewrite a stream-format "
            "file with pyarrow.ipc.new_file, and read Parquet with ParquetDataset."
        ) from error
    finally:
        source.close()
