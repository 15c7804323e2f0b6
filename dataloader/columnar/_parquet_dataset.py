"""``ParquetDataset``: random access over Parquet files through an index of their row groups."""

from __future__ import annotations

import collections
import functools
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from .._digest import digest
from .._remote import RETRIES, access_from, is_remote
from .._validate import check_bool, check_choice, check_positive_int
from ..errors import ArgumentValueError, DataLoaderError
from ._convert import STRINGS, column_to_array, fill_for
from ._files import PARQUET_SUFFIXES, files_fingerprint, mapped, resolve_files
from ._fixed import form_of
from ._gather import Runs, locate, take_numbers, take_rows
from ._readers import METADATA_THREADS, row_group_counts
from ._snapshot import open_cached, open_checked, parsing, read_error, stamps_fingerprint, take_stamps
from ._table_dataset import Allocate, Plan, TableDataset, check_columns, check_fill_null, check_nulls, check_same_columns

# Parquet files each thread keeps open (a batch of random rows jumps between files).
OPEN_FILES = 8


class _Group(NamedTuple):
    """A decoded row group: its fixed-width columns as NumPy, the others as an Arrow table."""

    arrays: dict[str, np.ndarray]
    table: pa.Table


class _Footer(NamedTuple):
    schema: pa.Schema
    rows: list[int]  # per row group
    nulls: dict[str, int]  # per flat column, from the statistics that record them


class ParquetDataset(TableDataset):
    """Rows of Parquet files by index: a map-style Dataset over their row groups.

    ``source`` is a file, a directory (its ``.parquet``/``.parq``/``.pq``
    files, recursively, sorted), a URI (``s3://...``) or a list of them, on
    ``filesystem`` if one is given. Building the dataset reads each file's
    footer and nothing else: an index from row number to row group.
    ``columns``, ``strings`` and ``fill_null`` are as in
    :class:`ArrowDataset`, and so are the rows and batches; a null the
    footers' statistics record is an error when the dataset is built, any
    other when its row group is read.

    A Parquet file can only be decoded a row group at a time (compressed,
    encoded pages), so ``__getitems__`` groups a batch's rows by row group,
    decodes each group it needs once, and takes the rows from it. Decoded
    groups are kept in a per-process LRU cache of ``cache_row_groups``
    groups (each worker has its own).

    Files are read as they were when the dataset was built: a file replaced or
    rewritten since is a :class:`~dataloader.SourceChangedError` when a process
    opens it, a failed read a :class:`~dataloader.DataFileError` naming the file
    and the row group. ``verify_checksums=True`` checks the pages' CRC checksums
    as they are read.

    When it is slow: random indices (``RandomSampler``) touch a different
    row group for nearly every sample, so each batch decodes up to
    ``batch_size`` whole row groups to use one row of each, and the cache
    cannot help once the data is larger than it. Sequential reading, or
    samplers that draw runs of neighbouring indices, decode each group once.
    For shuffled epochs over Parquet, read it as a stream
    (``dataloader.columnar.ParquetStream``, which shuffles row groups and
    rows within a buffer), or convert it once to an uncompressed Arrow IPC
    file and use :class:`ArrowDataset`, whose random access costs no decode.

    Remote files: ``retries`` and ``cache_dir``/``cache_limit`` work as in
    :class:`ParquetStream` (a file is fetched whole into the cache the first
    time a row of it is read).

    Example::

        dataset = ParquetDataset("data/", columns=["image", "label"])
        loader = DataLoader(dataset, SequentialSampler(dataset, batch_size=256), num_workers=4)
    """

    kind = "ParquetDataset"

    def __init__(
        self, source: Any, *, columns: Any = None, strings: str = "object", fill_null: Any = None,
        filesystem: Any = None, cache_row_groups: int = 8, verify_checksums: bool = False, retries: int = RETRIES,
        cache_dir: Any = None, cache_limit: int | None = None,
    ) -> None:
        strings = check_choice("strings", strings, STRINGS)
        self._cache_size = check_positive_int("cache_row_groups", cache_row_groups)
        self._verify = check_bool("verify_checksums", verify_checksums)
        access = access_from(retries, None, cache_dir, cache_limit)
        self._filesystem, self._paths = resolve_files(source, PARQUET_SUFFIXES, filesystem, what="source", access=access)
        self._file_cache = access.cache_for(self._filesystem)
        self._stamps = take_stamps(self._filesystem, self._paths, self.kind)  # before the footers: a later change shows
        footers = _footers(self._filesystem, self._paths)
        self._file_counts = [footer.rows for footer in footers]
        schema = footers[0].schema
        names = check_columns(columns, schema.names, "the files")
        for path, footer in zip(self._paths[1:], footers[1:]):
            chosen = None if columns is None else names
            check_same_columns(schema, footer.schema, chosen, (self._paths[0], path), self.kind)
        nulls = {name: sum(f.nulls.get(name, 0) for f in footers) for name in names}
        fill_null = check_fill_null(fill_null, schema, nulls, "the files")
        check_nulls(nulls, fill_null, self.kind)
        selected = pa.schema([schema.field(name) for name in names])
        fixed = {name: form for name in names if (form := form_of(selected.field(name).type)) is not None}
        self.plan = Plan(selected, strings, fill_null, fixed)
        # Row group g: file self._groups[g, 0], its group self._groups[g, 1]; its first row self._starts[g].
        groups = [(file, group, rows) for file, f in enumerate(footers) for group, rows in enumerate(f.rows) if rows]
        table = np.array(groups, dtype=np.int64).reshape(-1, 3)
        self._groups = table[:, :2]
        self._starts = np.concatenate(([0], np.cumsum(table[:, 2])[:-1])).astype(np.int64) if len(table) else table[:, 2]
        self._length = int(table[:, 2].sum())
        self._fingerprint: dict[str, Any] | None = None  # order_fingerprint(), made once
        self._start_process()

    def order_fingerprint(self) -> dict[str, Any]:
        """Which rows the indices mean, as plain values: a loader's resume state carries it and
        refuses other files (of the same total length too), and the same files rewritten since."""
        if self._fingerprint is None:
            self._fingerprint = {
                "kind": type(self).__name__,
                "files": files_fingerprint(self._paths),
                "stamps": stamps_fingerprint(self._stamps),
                "row_groups": f"{len(self._starts)} row groups, {digest(self._starts.tolist())}",
            }
        return self._fingerprint

    def _start_process(self) -> None:
        """The state each process keeps for itself: the cache of decoded groups, open files."""
        self._pid = os.getpid()
        self._cache: collections.OrderedDict[int, _Group] = collections.OrderedDict()
        self._lock = threading.Lock()
        self._open = threading.local()  # each thread reads through files of its own

    def _gather(self, rows: np.ndarray, allocate: Allocate) -> dict[str, Any]:
        if self._pid != os.getpid():  # a forked child: the parent's files are not ours to share
            self._start_process()
        group, offset = locate(rows, self._starts)
        runs = Runs(group)
        decoded = {g: self._group(g) for g in runs.parts()}  # each group read once per batch
        arrays: dict[str, Any] = {}
        for name in self.plan.fixed:
            out = self.plan.allocate(name, len(rows), allocate)
            arrays[name] = take_numbers({g: d.arrays[name] for g, d in decoded.items()}, runs, offset, out)
        if self.plan.general:
            tables = {g: d.table for g, d in decoded.items()}
            arrays.update(self.plan.convert(take_rows(tables, runs, offset)))
        return self.plan.ordered(arrays)

    def _group(self, group: int) -> _Group:
        """Row group ``group`` decoded, from the cache or the file (then cached, the least
        recently used group dropped beyond ``cache_row_groups``)."""
        with self._lock:
            found = self._cache.get(group)
            if found is not None:
                self._cache.move_to_end(group)
                return found
        decoded = self._decode(group)  # outside the lock: thread workers decode in parallel
        with self._lock:
            self._cache[group] = decoded
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return decoded

    def _decode(self, group: int) -> _Group:
        file, index = (int(x) for x in self._groups[group])
        plan = self.plan
        path = self._paths[file]
        try:
            table = parsing(
                lambda: self._file(file).read_row_group(index, columns=plan.names).combine_chunks(),
                self._filesystem, f"row group {index} of {path!r}", lambda: self._drop(file),
            )
        except Exception as error:
            raise read_error(error, self._paths[file], self.kind, index) from error
        arrays = {
            name: column_to_array(table.column(name), name, plan.strings, fill_for(plan.fill_null, name))
            for name in plan.fixed
        }
        return _Group(arrays, table.select(plan.general))

    def _file(self, index: int) -> pq.ParquetFile:
        """File ``index``, opened once per thread and kept among the last ``OPEN_FILES`` used."""
        files = getattr(self._open, "files", None)
        if files is None:
            files = self._open.files = collections.OrderedDict()
        handle = files.pop(index, None)
        if handle is None:
            handle = self._open_checked(index)
            while len(files) >= OPEN_FILES:
                files.popitem(last=False)[1].close()
        files[index] = handle
        return handle

    def _drop(self, index: int) -> None:
        """Forget file ``index`` as this thread read it (it did not parse): closed, its cached copy deleted."""
        handle = getattr(self._open, "files", {}).pop(index, None)
        if handle is not None:
            handle.close()
        if self._file_cache is not None:
            self._file_cache.discard(self._filesystem, self._paths[index])

    def _open_checked(self, index: int) -> pq.ParquetFile:
        """File ``index`` opened, after checking it is the file whose footer the index was
        built from (see :mod:`._snapshot`)."""
        path = self._paths[index]
        counts = lambda handle: row_group_counts(handle.metadata)  # noqa: E731
        if self._file_cache is not None:
            return open_cached(
                self._file_cache, self._open_parquet, pq.ParquetFile.close, counts, self._filesystem, path,
                self._stamps[index], self._file_counts[index], self.kind,
            )
        return open_checked(
            lambda: self._open_parquet(self._filesystem, path), pq.ParquetFile.close, counts, self._filesystem,
            path, self._stamps[index], self._file_counts[index], self.kind,
        )

    def _open_parquet(self, filesystem: pafs.FileSystem, path: str) -> pq.ParquetFile:
        remote = is_remote(filesystem)  # remote: a row group's chunks in as few requests as pyarrow can merge
        return pq.ParquetFile(
            path, filesystem=mapped(filesystem), page_checksum_verification=self._verify, pre_buffer=remote
        )

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        for key in ("_cache", "_lock", "_open", "_pid"):
            del state[key]  # per process: a worker starts its own
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._start_process()


def _footers(filesystem: pafs.FileSystem, paths: list[str]) -> list[_Footer]:
    """Each file's footer; a few at once on a remote filesystem, where each is a round trip."""
    if not is_remote(filesystem) or len(paths) < 2:
        return [_footer(filesystem, path) for path in paths]
    with ThreadPoolExecutor(METADATA_THREADS, thread_name_prefix="dataloader-metadata") as pool:
        return list(pool.map(functools.partial(_footer, filesystem), paths))


def _footer(filesystem: pafs.FileSystem, path: str) -> _Footer:
    """What the dataset needs from one file's footer (its metadata; no data is read)."""
    def footer() -> tuple[pq.FileMetaData, pa.Schema]:
        with pq.ParquetFile(path, filesystem=filesystem) as file:
            return file.metadata, file.schema_arrow

    try:
        meta, schema = parsing(footer, filesystem, f"the footer of {path!r}")
    except DataLoaderError:
        raise  # a RemoteReadError (denied, or the store kept failing): not a question of format
    except (pa.ArrowInvalid, OSError) as error:
        raise ArgumentValueError(
            f"cannot read {path!r} as Parquet ({error}). ParquetDataset reads Parquet files; read "
            "Arrow IPC (Feather) files with ArrowDataset."
        ) from error
    flat = {name for name in schema.names if not pa.types.is_nested(schema.field(name).type)}
    nulls: dict[str, int] = {}
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        for c in range(group.num_columns):
            chunk = group.column(c)
            stats = chunk.statistics
            if chunk.path_in_schema in flat and stats is not None and stats.has_null_count:
                nulls[chunk.path_in_schema] = nulls.get(chunk.path_in_schema, 0) + stats.null_count
    return _Footer(schema, row_group_counts(meta), nulls)
