"""Numbered Parquet shards in a directory, each written under a temporary name, then renamed.

``part-00000.parquet``, ``part-00001.parquet``, ...: equal row counts but the
last, row groups of equal row counts but each shard's last. A shard is
written as ``.part-NNNNN.parquet.tmp-<random>`` (hidden, and without a
Parquet suffix, so no reader of the directory picks it up) and renamed when
its footer is written, so an interrupted write leaves whole shards only: an
exception deletes the shard in progress, and a killed process leaves at
most one temporary file, which the next ``overwrite=True`` write removes.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import re
import uuid

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from ..errors import ArgumentTypeError, ArgumentValueError
from ._files import PARQUET_SUFFIXES, filesystem_and_path

_SHARD = re.compile(r"^part-\d{5}\.parquet$")
_TEMP = re.compile(r"^\.part-\d{5}\.parquet\.tmp-[0-9a-f]+$")
MAX_SHARDS = 100_000  # five digits keep the names in order when sorted as text


def shard_name(number: int) -> str:
    return f"part-{number:05d}.parquet"


def open_directory(directory: object, filesystem: pafs.FileSystem | None) -> tuple[pafs.FileSystem, str, str]:
    """(filesystem, path on it, the URI when ``directory`` is one, else "")."""
    if not isinstance(directory, (str, os.PathLike)):
        raise ArgumentTypeError(f"`directory` must be a path or a URI; got {type(directory).__name__}.")
    fs, path = filesystem_and_path(directory, filesystem, "directory")
    text = os.fspath(directory)
    return fs, path.rstrip("/") or "/", text if filesystem is None and "://" in text else ""


def prepare_directory(fs: pafs.FileSystem, path: str, overwrite: bool) -> None:
    """Create ``path``, or check that it holds nothing a reader would mix with new shards; with
    ``overwrite``, remove the shards (and leftover temporary files) an earlier write left there."""
    info = fs.get_file_info(path)
    if info.type == pafs.FileType.File:
        raise ArgumentValueError(f"`directory` names the file {path!r}; give a directory (it is created if missing).")
    if info.type == pafs.FileType.NotFound:
        fs.create_dir(path, recursive=True)
        return
    listed = fs.get_file_info(pafs.FileSelector(path, recursive=True))
    files = [f for f in listed if f.type == pafs.FileType.File]
    ours = [f.path for f in files if posixpath.dirname(f.path) == path.rstrip("/") and _SHARD.match(f.base_name)]
    foreign = sorted(f.path for f in files if f.path.endswith(PARQUET_SUFFIXES) and f.path not in ours)
    if foreign:
        raise ArgumentValueError(
            f"`directory` {path!r} holds Parquet files that are not shards of write_parquet_shards "
            f"({_names(foreign)}); a reader of the directory would mix them with the new shards. "
            "Write to another directory, or move those files away."
        )
    if ours and not overwrite:
        raise ArgumentValueError(
            f"`directory` {path!r} already holds {len(ours)} shard(s) ({_names(sorted(ours))}); pass "
            "overwrite=True to replace them, or write to another directory."
        )
    if overwrite:
        for stale in ours + [f.path for f in files if _TEMP.match(f.base_name)]:
            fs.delete_file(stale)


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
    ``abort`` deletes the shard in progress.
    """

    def __init__(
        self, fs: pafs.FileSystem, directory: str, schema: pa.Schema, shard_rows: int, group_rows: int, compression: str
    ) -> None:
        self.fs, self.directory, self.schema = fs, directory, schema
        self.shard_rows, self.group_rows, self.compression = shard_rows, group_rows, compression
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
            )
        return self._writer

    def _finish_shard(self) -> None:
        writer, self._writer = self._writer, None
        writer.close()
        final = posixpath.join(self.directory, shard_name(len(self.paths)))
        self.fs.move(self._temp, final)
        self.paths.append(final)
        self._filled = 0
