"""Numbered Parquet shards in a directory, each written under a temporary name, then renamed.

``part-00000.parquet``, ``part-00001.parquet``, ...: equal row counts but the
last, row groups of equal row counts but each shard's last, every page with a
CRC checksum unless turned off. A shard is written as
``.part-NNNNN.parquet.tmp-<random>`` (hidden, and without a Parquet suffix, so
no reader of the directory picks it up) and renamed when its footer is
written, so an interrupted write leaves whole shards only: an exception
deletes the shard in progress, and a killed process leaves at most one
temporary file, which the next ``overwrite=True`` write removes.

Whole shards are not a whole dataset, so the directory is marked as well: an
empty ``_WRITE_IN_PROGRESS`` file (``WRITE_IN_PROGRESS``) is written before
anything in the directory changes (old shards included), and deleted as the
very last step of a write that succeeded. An exception or a kill leaves it, and with it
readers refuse the directory instead of reading part of the data as all of it;
a later write refuses it too, unless ``overwrite=True``.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import re
import uuid
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from ..errors import ArgumentTypeError, ArgumentValueError
from ._files import PARQUET_SUFFIXES, WRITE_IN_PROGRESS, filesystem_and_path

_SHARD = re.compile(r"^part-\d{5}\.parquet$")
_TEMP = re.compile(r"^\.part-\d{5}\.parquet\.tmp-[0-9a-f]+$")


@dataclass(frozen=True)
class ShardFormat:
    """How a writer names its files, to tell an earlier write's files from others in a directory."""

    shard: re.Pattern[str]  # its shards (and their sidecars)
    temp: re.Pattern[str]  # its temporary files
    suffixes: tuple[str, ...]  # the files a reader of the directory reads
    kind: str  # "Parquet", "tar": the files' kind in messages
    writer: str  # the function that writes them
    label: str = ""  # before "shard(s)" in messages


PARQUET_SHARDS = ShardFormat(_SHARD, _TEMP, PARQUET_SUFFIXES, "Parquet", "write_parquet_shards")
MAX_SHARDS = 100_000  # five digits keep the names in order when sorted as text


def shard_name(number: int) -> str:
    return f"part-{number:05d}.parquet"


def open_directory(directory: object, filesystem: pafs.FileSystem | None) -> tuple[pafs.FileSystem, str, str]:
    """(filesystem, path on it, the URI when ``directory`` is one, else "")."""
    if not isinstance(directory, (str, os.PathLike)):
        raise ArgumentTypeError(f"`directory` must be a path or a URI; got {type(directory).__name__}.")
    text = os.fspath(directory)
    if not text:  # "" would silently mean the current directory (or a filesystem's root)
        raise ArgumentValueError(
            '`directory` is an empty string; give a path or a URI ("." for the current directory).'
        )
    fs, path = filesystem_and_path(directory, filesystem, "directory")
    return fs, path.rstrip("/") or "/", text if filesystem is None and "://" in text else ""


def prepare_directory(fs: pafs.FileSystem, path: str, overwrite: bool, form: ShardFormat = PARQUET_SHARDS) -> None:
    """Create ``path``, or check that it holds nothing a reader would mix with new shards; then
    mark it in progress and, with ``overwrite``, remove what an earlier write left there (shards,
    temporary files). The marker goes first, so that a write killed while removing reads as unfinished."""
    info = fs.get_file_info(path)
    if info.type == pafs.FileType.File:
        raise ArgumentValueError(f"`directory` names the file {path!r}; give a directory (it is created if missing).")
    if info.type == pafs.FileType.NotFound:
        fs.create_dir(path, recursive=True)
        _mark_in_progress(fs, path)
        return
    stale = earlier_write(fs, path, overwrite, form)
    _mark_in_progress(fs, path)  # a stale marker is truncated, and now stands for this write
    for leftover in stale:
        fs.delete_file(leftover)


def finish_directory(fs: pafs.FileSystem, path: str) -> None:
    """Delete the in-progress marker: the last step of a write that succeeded."""
    fs.delete_file(_marker(path))


def _marker(path: str) -> str:
    return posixpath.join(path, WRITE_IN_PROGRESS)


def _mark_in_progress(fs: pafs.FileSystem, path: str) -> None:
    with fs.open_output_stream(_marker(path)):
        pass


def earlier_write(fs: pafs.FileSystem, path: str, overwrite: bool, form: ShardFormat = PARQUET_SHARDS) -> list[str]:
    """The files an earlier write of ``form`` left in ``path`` (its shards, their sidecars and
    temporary files), which ``overwrite`` allows to replace; other files of its kind, or without
    ``overwrite`` any of those or a marker of an unfinished write, are an error."""
    listed = fs.get_file_info(pafs.FileSelector(path, recursive=True))
    top = [f for f in listed if f.type == pafs.FileType.File and posixpath.dirname(f.path) == path.rstrip("/")]
    ours = sorted(f.path for f in top if form.shard.match(f.base_name))
    foreign = sorted(
        f.path for f in listed
        if f.type == pafs.FileType.File and f.path.endswith(form.suffixes) and f.path not in ours
    )
    if foreign:
        raise ArgumentValueError(
            f"`directory` {path!r} holds {form.kind} files that are not shards of {form.writer} "
            f"({_names(foreign)}); a reader of the directory would mix them with the new shards. "
            "Write to another directory, or move those files away."
        )
    if not overwrite:
        shards = [p for p in ours if p.endswith(form.suffixes)]
        _refuse_earlier(path, shards, any(f.base_name == WRITE_IN_PROGRESS for f in top), form.label)
    return ours + [f.path for f in top if form.temp.match(f.base_name)]


def _refuse_earlier(path: str, shards: list[str], unfinished: bool, label: str = "") -> None:
    """Raise when an earlier write left ``shards`` or its in-progress marker (``unfinished``)."""
    if unfinished:
        raise ArgumentValueError(
            f"`directory` {path!r} holds {WRITE_IN_PROGRESS}: an earlier write to it did not finish, and "
            f"left {len(shards)} whole shard(s) of its data; pass overwrite=True to replace them, or write "
            "to another directory."
        )
    if shards:
        raise ArgumentValueError(
            f"`directory` {path!r} already holds {len(shards)} {label}shard(s) ({_names(shards)}); pass "
            "overwrite=True to replace them, or write to another directory."
        )


def uri_of(shard: str, directory_uri: str) -> str:
    """A shard's path as a URI in the form of ``directory_uri`` (its encoding and query kept), or
    the path itself when the directory was not given as a URI."""
    if not directory_uri:
        return shard
    base, sep, query = directory_uri.partition("?")
    return f"{base.rstrip('/')}/{posixpath.basename(shard)}{sep}{query}"


def _names(paths: list[str], shown: int = 3) -> str:
    names = ", ".join(posixpath.basename(p) for p in paths[:shown])
    return names + (f", ... ({len(paths)} in all)" if len(paths) > shown else "")


class ShardWriter:
    """Writes tables of ``schema`` as shards of ``shard_rows`` rows in row groups of ``group_rows``.

    ``write`` takes tables of any size and cuts them where a row group or a
    shard ends; ``close`` writes the rest and returns the shards' paths;
    ``abort`` deletes the shard in progress. ``page_checksums`` writes a CRC
    in every page's header, which readers can verify to catch corrupted bytes.
    """

    def __init__(
        self,
        fs: pafs.FileSystem,
        directory: str,
        schema: pa.Schema,
        shard_rows: int,
        group_rows: int,
        compression: str,
        page_checksums: bool = True,
    ) -> None:
        self.fs, self.directory, self.schema = fs, directory, schema
        self.shard_rows, self.group_rows, self.compression = shard_rows, group_rows, compression
        self.page_checksums = page_checksums
        self.paths: list[str] = []
        self._pending: list[pa.Table] = []
        self._pending_rows = 0
        self._writer: pq.ParquetWriter | None = None
        self._temp = ""
        self._filled = 0  # rows in the shard in progress

    def write(self, table: pa.Table) -> None:
        self._pending.append(table)
        self._pending_rows += table.num_rows
        while self._pending_rows and self._pending_rows >= self._room():
            self._write_rows(self._room())

    def close(self) -> list[str]:
        if self._pending_rows:
            self._write_rows(self._pending_rows)
        if self._writer is not None:
            self._finish_shard()
        return self.paths

    def abort(self) -> None:
        """Delete the shard in progress; the finished ones stay (each is whole)."""
        writer, self._writer = self._writer, None
        if writer is None:
            return
        with contextlib.suppress(Exception):  # the error being handled is the one to report
            writer.close()
        with contextlib.suppress(OSError):
            self.fs.delete_file(self._temp)

    def _room(self) -> int:
        return min(self.group_rows, self.shard_rows - self._filled)

    def _write_rows(self, count: int) -> None:
        table = pa.concat_tables(self._pending) if len(self._pending) > 1 else self._pending[0]
        rest = table.slice(count)
        self._pending = [rest] if rest.num_rows else []
        self._pending_rows -= count
        self._shard().write_table(table.slice(0, count), row_group_size=count)
        self._filled += count
        if self._filled == self.shard_rows:
            self._finish_shard()

    def _shard(self) -> pq.ParquetWriter:
        if self._writer is None:
            number = len(self.paths)
            if number >= MAX_SHARDS:
                raise ArgumentValueError(
                    f"the data needs more than {MAX_SHARDS:,} shards of {self.shard_rows:,} rows; raise "
                    "rows_per_shard so that the shards' names stay in order."
                )
            self._temp = posixpath.join(self.directory, f".{shard_name(number)}.tmp-{uuid.uuid4().hex}")
            binary = [f.name for f in self.schema if pa.types.is_binary(f.type) or pa.types.is_large_binary(f.type)]
            self._writer = pq.ParquetWriter(
                self._temp,
                self.schema,
                filesystem=self.fs,
                compression=self.compression,
                # encoded images and other blobs rarely repeat: a dictionary would only be built and dropped
                use_dictionary=[f.name for f in self.schema if f.name not in binary],
                write_page_checksum=self.page_checksums,
            )
        return self._writer

    def _finish_shard(self) -> None:
        writer, self._writer = self._writer, None
        writer.close()
        final = posixpath.join(self.directory, shard_name(len(self.paths)))
        self.fs.move(self._temp, final)
        self.paths.append(final)
        self._filled = 0
