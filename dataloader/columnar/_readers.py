"""The units of columnar files: their row counts from metadata, and reading a piece of one.

A unit is what a file lets us read on its own: a Parquet row group, an Arrow
IPC record batch. :class:`ParquetUnits` and :class:`ArrowUnits` list them
once (footers only, when the stream is built) and hold nothing open, so a
stream pickles to spawned workers as paths and numbers. Each ``iter()`` makes
its own reader (:meth:`reader`), which opens files as it needs them and
closes them when the iteration ends.

Remote files (:mod:`dataloader._remote`): the filesystem comes behind
retries; footers are read by a few threads at once; a reader reads the
next pieces ahead in background threads, up to the ``read_ahead`` budget of
bytes, each thread with its own open files; with a cache, a file is read
from its local copy, fetched whole the first time.

Projection and filters: Parquet decodes only the columns a read names
(``read_row_group(columns=)``), and a filter goes to ``pyarrow.dataset``,
which also skips row groups whose statistics rule every row out. Arrow IPC
files are memory-mapped (local files), so unneeded columns cost nothing; a
filter is applied to the rows read.
"""

from __future__ import annotations

import collections
import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from .._remote import Access, is_remote, read_ahead
from ..errors import ArgumentTypeError, ArgumentValueError, DataLoaderError
from ._files import mapped
from ._sharding import Piece
from ._snapshot import open_cached, open_checked, parsing, read_error, take_stamps
from ._table_dataset import check_same_columns

# Files a reader keeps open at once (units read in a shuffled order jump between files).
OPEN_FILES = 8
# Footers read at once when the files are remote (each read is a round trip or two).
METADATA_THREADS = 8
# Remote files a reader opens ahead of the pieces it reads, and the threads that open them.
WARM_FILES, WARM_THREADS = 8, 4
# The column a partial-row-group filter reads its matches into.
_MATCH = "__dataloader_filter_match__"


class Units:
    """The units of ``paths`` in file order: ``units[i]`` is (file index, unit in the file)."""

    kind = "stream"  # what errors call the reader: "the ParquetStream read its metadata"
    unit_name = "row group"

    def __init__(
        self, filesystem: pafs.FileSystem, paths: list[str], columns: Any, filter: Any, verify_checksums: bool = False,
        access: Access | None = None,
    ) -> None:
        self.filesystem = filesystem
        self.paths = paths
        self.verify_checksums = verify_checksums
        access = access or Access()
        self.cache = access.cache_for(filesystem)
        self.read_ahead = access.budget(filesystem)  # bytes; 0: read one piece at a time
        self.stamps = take_stamps(filesystem, paths, self.kind)  # before the metadata: a later change shows
        self.units: list[tuple[int, int]] = []
        self.counts: list[int] = []
        self.file_counts: list[list[int]] = []  # per file, the rows of each of its units
        self.schema: pa.Schema | None = None
        if is_remote(filesystem) and len(paths) > 1:
            with ThreadPoolExecutor(METADATA_THREADS, thread_name_prefix="dataloader-metadata") as pool:
                metadata = list(pool.map(self._metadata, paths))
        else:
            metadata = [self._metadata(path) for path in paths]
        for index, (path, (schema, counts)) in enumerate(zip(paths, metadata)):
            self._same_schema(schema, path, columns)
            self.units += [(index, part) for part in range(len(counts))]
            self.counts += counts
            self.file_counts.append(counts)
        self.columns = check_columns(columns, self.schema)  # type: ignore[arg-type]
        self.filter = check_filter(filter, self.schema)  # type: ignore[arg-type]

    @property
    def names(self) -> list[str]:
        """The columns read: those asked for, else the first file's, in its order."""
        return self.columns or self.schema.names  # type: ignore[union-attr]

    def _metadata(self, path: str) -> tuple[pa.Schema, list[int]]:
        raise NotImplementedError

    def _same_schema(self, schema: pa.Schema, path: str, columns: Any) -> None:
        if self.schema is None:
            self.schema = schema
            return
        names = list(columns) if isinstance(columns, (list, tuple)) else None
        check_same_columns(self.schema, schema, names, (self.paths[0], path), self.kind)

    def reader(self) -> "Reader":
        raise NotImplementedError

    def piece_bytes(self, piece: Piece) -> int:
        """About how many bytes reading ``piece`` fetches: its share of its file's size."""
        file, _ = self.units[piece.unit]
        size = self.stamps[file].size or 0
        rows = sum(self.file_counts[file]) or 1
        return size * (piece.stop - piece.start) // rows


class Reader:
    """Reads pieces of units for one iteration; keeps up to ``OPEN_FILES`` files open.

    With a read-ahead budget, :meth:`tables` reads the next pieces in background threads,
    each through a reader of its own (open files are not shared between threads).
    """

    def __init__(self, units: Units) -> None:
        self.units = units
        self._open: collections.OrderedDict[int, Any] = collections.OrderedDict()
        self.shared = _Shared()  # with the readers of the read-ahead threads
        self._thread_readers: list[Reader] = []
        self._local = threading.local()
        self._lock = threading.Lock()
        self._ahead: Iterator[pa.Table] | None = None

    def tables(self, pieces: Iterable[Piece]) -> Iterator[pa.Table]:
        """Each piece's rows (projected and filtered), skipping pieces left empty."""
        budget = self.units.read_ahead
        read = self.read_piece
        if budget > 0:
            if is_remote(self.units.filesystem) and self.units.cache is None:
                pieces = self._warming(list(pieces))
            self._ahead = read_ahead(pieces, self._read_in_thread, self.units.piece_bytes, budget)
            pieces, read = self._ahead, _itself  # type: ignore[assignment]
        for piece in pieces:
            table = read(piece)
            if table.num_rows:
                yield table

    def _warming(self, pieces: list[Piece]) -> Iterator[Piece]:
        """``pieces``, while the next ``WARM_FILES`` files they reach are opened ahead in
        threads of their own. Opening a remote file is a chain of round trips (its size, its
        stamp, a Parquet footer) that every thread reading it would otherwise wait for in turn
        at each file boundary; opened ahead, the readers find it all in :attr:`shared`."""
        files = list(dict.fromkeys(self.units.units[piece.unit][0] for piece in pieces))
        rank = {file: position for position, file in enumerate(files)}
        pool = ThreadPoolExecutor(WARM_THREADS, thread_name_prefix="dataloader-open-ahead")
        opened = 0
        try:
            for piece in pieces:
                horizon = min(len(files), rank[self.units.units[piece.unit][0]] + WARM_FILES)
                for file in files[opened:horizon]:
                    pool.submit(self._warm, file)
                opened = max(opened, horizon)
                yield piece
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def _warm(self, index: int) -> None:
        """Open file ``index`` once, checked, and let it go: what it learnt stays in ``shared``.
        A failure is left to the read that needs the file, which raises it in its place."""
        reader = type(self)(self.units)
        reader.shared = self.shared
        try:
            reader.file(index)
        except Exception:  # noqa: BLE001 - told by the read of the file, where it belongs
            pass
        finally:
            reader.close()

    def _read_in_thread(self, piece: Piece) -> pa.Table:
        reader = getattr(self._local, "reader", None)
        if reader is None:
            reader = self._local.reader = type(self)(self.units)
            reader.shared = self.shared
            with self._lock:
                self._thread_readers.append(reader)
        return reader.read_piece(piece)

    def read(self, piece: Piece) -> pa.Table:
        raise NotImplementedError

    def file(self, index: int) -> Any:
        """File ``index``, opened once and kept among the last ``OPEN_FILES`` used; checked to be
        the file the units were counted in (see :mod:`._snapshot`)."""
        handle = self._open.pop(index, None)
        if handle is None:
            units = self.units
            path = units.paths[index]
            if units.cache is not None:
                handle = self._open_cached(index)
            else:  # the file's stamp and footer are read at its first opening in this iteration
                with self.shared.first(index):
                    handle = open_checked(
                        lambda: self._open_file(units.filesystem, path), _close, self._counts, units.filesystem,
                        path, units.stamps[index], units.file_counts[index], units.kind, units.unit_name + "s",
                        recheck=index not in self.shared.checked,
                    )
                    self.shared.checked.add(index)
            while len(self._open) >= OPEN_FILES:
                _close(self._open.popitem(last=False)[1])
        self._open[index] = handle
        return handle

    def _open_cached(self, index: int) -> Any:
        units = self.units
        return open_cached(
            units.cache, self._open_file, _close, self._counts, units.filesystem, units.paths[index],  # type: ignore[arg-type]
            units.stamps[index], units.file_counts[index], units.kind, units.unit_name + "s",
        )

    def read_piece(self, piece: Piece) -> pa.Table:
        """:meth:`read`, with an error while reading named by its file and unit; read again
        where a remote file's bytes do not parse (:func:`._snapshot.parsing`)."""
        units = self.units
        file, part = units.units[piece.unit]
        path = units.paths[file]
        try:
            return parsing(
                lambda: self.read(piece), units.filesystem, f"{units.unit_name} {part} of {path!r}", lambda: self._drop(file)
            )
        except Exception as error:
            raise read_error(error, path, units.kind, part, units.unit_name) from error

    def _drop(self, index: int) -> None:
        """Forget file ``index`` as read so far (it did not parse): closed, and its cached copy deleted."""
        handle = self._open.pop(index, None)
        if handle is not None:
            _close(handle)
        if self.units.cache is not None:
            self.units.cache.discard(self.units.filesystem, self.units.paths[index])

    def _open_file(self, filesystem: pafs.FileSystem, path: str) -> Any:
        """Open ``path`` on ``filesystem`` (the units' own, or the local disk for a cached copy)."""
        raise NotImplementedError

    def _counts(self, handle: Any) -> list[int] | None:
        """The rows of each unit of an opened file, from its metadata (None: too costly to know)."""
        raise NotImplementedError

    def close(self) -> None:
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            ahead.close()  # type: ignore[attr-defined]  # joins the read-ahead threads
        for reader in self._thread_readers:
            reader.close()
        self._thread_readers.clear()
        while self._open:
            _close(self._open.popitem()[1])


class ParquetUnits(Units):
    """The row groups of Parquet files; row counts from the footers."""

    kind = "ParquetStream"

    def _metadata(self, path: str) -> tuple[pa.Schema, list[int]]:
        def footer() -> tuple[pa.Schema, list[int]]:
            with pq.ParquetFile(path, filesystem=self.filesystem) as file:
                return file.schema_arrow, row_group_counts(file.metadata)

        try:
            return parsing(footer, self.filesystem, f"the footer of {path!r}")
        except DataLoaderError:
            raise  # a RemoteReadError (denied, or the store kept failing): not a question of format
        except (pa.ArrowInvalid, OSError) as error:
            raise ArgumentValueError(
                f"cannot read {path!r} as Parquet ({error}). Give Parquet files only; ArrowStream "
                "reads Arrow IPC (Feather) files."
            ) from error

    def reader(self) -> "ParquetReader":
        return ParquetReader(self)


class ParquetReader(Reader):
    units: ParquetUnits

    def _open_file(self, filesystem: pafs.FileSystem, path: str) -> Any:
        # Remote: a row group's column chunks in as few ranged requests as pyarrow can merge them into.
        filesystem, verify, remote = mapped(filesystem), self.units.verify_checksums, is_remote(filesystem)
        if self.units.filter is None:  # a footer already read in this iteration is not read again
            file = pq.ParquetFile(
                path, filesystem=filesystem, page_checksum_verification=verify, pre_buffer=remote,
                metadata=self.shared.footers.get(path),
            )
            self.shared.footers[path] = file.metadata
            return file
        options = ds.ParquetFragmentScanOptions(page_checksum_verification=verify, pre_buffer=remote)
        return ds.ParquetFileFormat(default_fragment_scan_options=options).make_fragment(path, filesystem=filesystem)

    def _counts(self, handle: Any) -> list[int]:
        return row_group_counts(handle.metadata)

    def read(self, piece: Piece) -> pa.Table:
        units = self.units
        file, group = units.units[piece.unit]
        whole = piece.start == 0 and piece.stop == units.counts[piece.unit]
        if units.filter is None:
            table = self.file(file).read_row_group(group, columns=units.names)
            return table if whole else table.slice(piece.start, piece.stop - piece.start)
        fragment = self.file(file).subset(row_group_ids=[group])
        names = units.names
        if whole:  # the scanner filters, skipping the group when its statistics allow
            return fragment.to_table(columns=names, filter=units.filter)
        # Part of a group: keep row positions, so read the matches as a column and cut first.
        projection = {**{name: ds.field(name) for name in names}, _MATCH: units.filter}
        table = fragment.to_table(columns=projection).slice(piece.start, piece.stop - piece.start)
        return table.filter(table.column(_MATCH)).drop_columns([_MATCH])


class ArrowUnits(Units):
    """The record batches of Arrow IPC files (the file format); row counts from each batch's header."""

    kind = "ArrowStream"
    unit_name = "record batch"

    def _metadata(self, path: str) -> tuple[pa.Schema, list[int]]:
        def header() -> tuple[pa.Schema, list[int]]:
            source, file = open_ipc(self.filesystem, path, parsed=False)
            try:
                return file.schema, [file.get_batch(i).num_rows for i in range(file.num_record_batches)]
            finally:
                source.close()

        try:
            return parsing(header, self.filesystem, f"the record batches of {path!r}")
        except pa.ArrowInvalid as error:
            raise _not_ipc(path, error) from error

    def reader(self) -> "ArrowReader":
        return ArrowReader(self)


class ArrowReader(Reader):
    units: ArrowUnits

    def _open_file(self, filesystem: pafs.FileSystem, path: str) -> Any:
        return open_ipc(filesystem, path, parsed=False)  # a cut header is read again (read_piece)

    def _counts(self, handle: Any) -> list[int] | None:
        source, file = handle
        if not isinstance(source, pa.MemoryMappedFile):
            return None  # counting a remote file's rows reads it; its size and time are checked
        return [file.get_batch(i).num_rows for i in range(file.num_record_batches)]

    def read(self, piece: Piece) -> pa.Table:
        units = self.units
        file, part = units.units[piece.unit]
        table = pa.Table.from_batches([self.file(file)[1].get_batch(part)])
        table = table.slice(piece.start, piece.stop - piece.start)
        if units.filter is not None:
            table = table.filter(units.filter)
        return table.select(units.names)


def open_ipc(filesystem: pafs.FileSystem, path: str, parsed: bool = True) -> tuple[Any, pa.ipc.RecordBatchFileReader]:
    """(the open source, its IPC file reader); local files are memory-mapped. A file that is not
    Arrow IPC is an ``ArgumentValueError`` (``parsed=False``: pyarrow's error, to be read again)."""
    try:
        if isinstance(filesystem, pafs.LocalFileSystem):
            source = pa.memory_map(path, "r")
        else:
            source = filesystem.open_input_file(path)
    except DataLoaderError:
        raise
    except OSError as error:
        raise ArgumentValueError(f"cannot open {path!r} ({error}).") from error
    try:
        return source, pa.ipc.open_file(source)
    except BaseException as error:
        source.close()
        if parsed and isinstance(error, pa.ArrowInvalid):
            raise _not_ipc(path, error) from error
        raise


def _not_ipc(path: str, error: BaseException) -> ArgumentValueError:
    return ArgumentValueError(
        f"cannot read {path!r} as an Arrow IPC file ({error}). ArrowStream reads the IPC file "
        "format (pyarrow.feather.write_feather, pyarrow.ipc.new_file); rewrite a stream-format "
        "file with pyarrow.ipc.new_file, and read Parquet with ParquetStream."
    )


def check_columns(columns: Any, schema: pa.Schema) -> list[str] | None:
    """``columns`` as a list of names of ``schema``, or None for all of them."""
    if columns is None:
        return None
    names = isinstance(columns, (list, tuple)) and all(isinstance(c, str) for c in columns)
    if not names:
        raise ArgumentTypeError(f"`columns` must be a list of column names; got {columns!r}.")
    if not columns:
        raise ArgumentValueError("`columns` must name at least one column; got an empty list. Pass None for all.")
    unknown = [c for c in columns if c not in schema.names]
    if unknown or len(set(columns)) != len(columns):
        raise ArgumentValueError(
            f"`columns` must name distinct columns of the files; got {list(columns)}, and the "
            f"files have {schema.names}."
        )
    return list(columns)


def check_filter(filter: Any, schema: pa.Schema) -> pc.Expression | None:
    """``filter``, after checking it is an expression that ``schema``'s rows can be filtered by."""
    if filter is None:
        return None
    if not isinstance(filter, pc.Expression):
        raise ArgumentTypeError(
            f"`filter` must be a pyarrow.dataset expression such as pyarrow.dataset.field('x') > 3; "
            f"got {type(filter).__name__}."
        )
    try:
        schema.empty_table().filter(filter)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, TypeError) as error:
        raise ArgumentValueError(
            f"`filter` does not apply to the files' columns {schema.names}: {error}"
        ) from error
    return filter


def row_group_counts(metadata: pq.FileMetaData) -> list[int]:
    """The rows of each row group of a Parquet file, from its footer."""
    return [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)]


def _close(handle: Any) -> None:
    """Close what :meth:`Reader.file` opened (a ParquetFile, an (ipc source, reader) pair)."""
    close = getattr(handle[0] if isinstance(handle, tuple) else handle, "close", None)
    if close is not None:
        close()


class _Shared:
    """What a reader and the readers of its read-ahead threads learn once for all of them: the
    files whose stamps were checked, the Parquet footers read. Threads that ask for the same
    key at once wait for the first one's answer: on a store each is a request."""

    def __init__(self) -> None:
        self.checked: set[int] = set()
        self.footers: dict[str, pq.FileMetaData] = {}
        self._lock = threading.Lock()
        self._keys: dict[Any, threading.Lock] = {}

    @contextlib.contextmanager
    def first(self, key: Any) -> Iterator[None]:
        """Hold ``key``'s lock: the second thread to ask finds what the first one stored."""
        with self._lock:
            lock = self._keys.setdefault(key, threading.Lock())
        with lock:
            yield


def _itself(table: pa.Table) -> pa.Table:
    return table
