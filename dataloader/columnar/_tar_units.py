"""The units of WebDataset tar shards: one unit per shard, its samples the rows.

:class:`TarUnits` lists each shard's samples from its index (:mod:`._tar_index`),
so the stream plans, shards and resumes exactly as it does over Parquet row
groups. :class:`TarReader` reads a piece (samples ``[start, stop)`` of a
shard) with one ranged read of the bytes the index locates, and parses the
members out of memory into an Arrow table: ``__key__`` and one binary column
per field, null where a sample lacks the member.
"""

from __future__ import annotations

import io
import tarfile
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from ..errors import ArgumentValueError, DataFileError
from ._readers import Reader, Units
from ._sharding import Piece
from ._snapshot import parsing
from ._tar_index import (
    DataAfterEndError, SampleGrouper, TarBytesError, TarIndex, index_shard, not_a_tar, read_sidecar, scanned,
)

KEY = "__key__"
# A column the reader adds for the stream's error messages (which shard a row came from); the
# stream drops it before yielding.
SHARD = "__shard__"


class TarUnits(Units):
    """The shards of a :class:`~dataloader.TarStream`, each one unit of its samples."""

    kind = "TarStream"
    unit_name = "shard"

    def __init__(
        self, filesystem: pafs.FileSystem, paths: list[str], columns: Any, filter: Any,
        verify_checksums: bool = False, **kwargs: Any,
    ) -> None:
        if filter is not None:
            raise ArgumentValueError(
                "TarStream takes no `filter`: tar samples have no column statistics to filter by, and "
                "a filter's matches would be known only after reading. Filter in a transform (return "
                "None for the loader to skip a sample), or select the samples when writing the shards."
            )
        if verify_checksums:
            raise ArgumentValueError(
                "`verify_checksums=True` checks Parquet page checksums, and tar shards carry none. "
                "Drop verify_checksums for TarStream."
            )
        self._positions = {path: position for position, path in enumerate(paths)}
        self._found: dict[str, TarIndex] = {}  # filled by _metadata, which may run on several threads
        super().__init__(filesystem, paths, columns, None, False, **kwargs)
        self.indexes = [self._found[path] for path in self.paths]
        del self._found, self._positions

    @property
    def names(self) -> list[str]:
        """``__key__`` and the fields read: those asked for, else every field seen, sorted."""
        if self.columns is None:
            return list(self.schema.names)  # type: ignore[union-attr]
        return [KEY] + [name for name in self.columns if name != KEY]

    def _metadata(self, path: str) -> tuple[pa.Schema, list[int]]:
        """The shard's fields and sample count, from its index (the base reads remote shards'
        metadata on a few threads at once, so the sidecars' round trips overlap)."""
        stamp = self.stamps[self._positions[path]]
        index = read_sidecar(self.filesystem, path, stamp.size)
        if index is None and self.cache is not None:
            index = self._scan_copy(path)
        if index is None:
            index = index_shard(self.filesystem, path, stamp.size)
        self._found[path] = index
        return fields_schema(index.fields), [index.samples]

    def _scan_copy(self, path: str) -> TarIndex:
        """A scan reads the whole shard: into the cache, where the first epoch finds it. A copy
        that does not read as a tar is fetched again (a body cut short on the way), then the
        error is a ``RemoteReadError``."""
        cache, stamp = self.cache, self.stamps[self._positions[path]]

        def scan_copy() -> TarIndex:
            copy = cache.fetch(self.filesystem, path, stamp.size, stamp.version)  # type: ignore[union-attr]
            # the bytes after its end-of-archive marker are read again from the store (the copy's
            # fetch may have been cut there, its tail left as zeros)
            return scanned(pafs.LocalFileSystem(), copy.path, stamp.size or 0, (self.filesystem, path))

        try:
            return parsing(
                scan_copy, self.filesystem, f"{path!r}, scanned for its samples",
                lambda: cache.discard(self.filesystem, path),  # type: ignore[union-attr]
            )
        except DataAfterEndError as error:
            raise error.local from error
        except TarBytesError as error:
            raise not_a_tar(path, error) from error.__cause__

    def _same_schema(self, schema: pa.Schema, path: str, columns: Any) -> None:
        """Shards may hold different fields (a sample lacks what it lacks): keep them all."""
        if self.schema is None:
            self.schema = schema
            return
        fields = set(self.schema.names[1:]) | set(schema.names[1:])
        self.schema = fields_schema(fields)

    def piece_bytes(self, piece: Piece) -> int:
        """The bytes reading ``piece`` fetches, exactly (its one ranged read)."""
        begin, end = self.indexes[self.units[piece.unit][0]].span(piece.start, piece.stop)
        return end - begin

    def reader(self) -> "TarReader":
        return TarReader(self)


def fields_schema(fields: Any) -> pa.Schema:
    """``__key__`` (a string) and a binary column per field, sorted."""
    return pa.schema([(KEY, pa.string())] + [(name, pa.large_binary()) for name in sorted(fields)])


class TarReader(Reader):
    """Reads pieces of shards: one ranged read each, parsed in memory."""

    units: TarUnits

    def _open_file(self, filesystem: pafs.FileSystem, path: str) -> Any:
        return filesystem.open_input_file(path)

    def _counts(self, handle: Any) -> list[int] | None:
        return None  # counting a shard's samples reads it; its size and time are checked

    def read(self, piece: Piece) -> pa.Table:
        units = self.units
        file = units.units[piece.unit][0]
        begin, end = units.indexes[file].span(piece.start, piece.stop)
        data = self.file(file).read_at(end - begin, begin)
        path = units.paths[file]
        if len(data) != end - begin:
            raise DataFileError(
                f"cannot read samples {piece.start}..{piece.stop - 1} of {path!r}: {len(data)} of "
                f"{end - begin} bytes came back at offset {begin}; the shard was truncated after the "
                "TarStream indexed it. Write it again, and build the TarStream again.",
                path, piece.start,
            )
        samples = parse_samples(data, path, piece.start)
        if len(samples) != piece.stop - piece.start:
            raise TarParseError(
                f"samples {piece.start}..{piece.stop - 1} of {path!r} hold {len(samples)} samples where "
                f"its index says {piece.stop - piece.start}",
                DataFileError(
                    f"samples {piece.start}..{piece.stop - 1} of {path!r} hold {len(samples)} samples where "
                    f"its index says {piece.stop - piece.start}: the index ({path}.idx) does not describe "
                    "this shard. Delete the .idx file (the shard is then scanned), or write both again.",
                    path, piece.start,
                ),
            )
        return samples_table(samples, units.names, file)

    def read_piece(self, piece: Piece) -> pa.Table:
        """The base's read (a remote piece that does not parse is read again, then a
        ``RemoteReadError``); a local one is a ``DataFileError`` that says what to do."""
        try:
            return super().read_piece(piece)
        except TarParseError as error:
            raise error.local from error.__cause__


class TarParseError(TarBytesError):
    """A piece whose bytes do not parse: the cause in the message (what a ``RemoteReadError``
    quotes after the retries), and ``local``, the error for a file read once, with its advice."""

    def __init__(self, message: str, local: DataFileError) -> None:
        super().__init__(message)
        self.local = local


def parse_samples(data: bytes, path: str, first: int) -> list[tuple[str, dict[str, bytes]]]:
    """The samples in ``data``, bytes of a shard that begin at sample ``first``'s first header."""
    view = memoryview(data)
    grouper = SampleGrouper(path)
    samples: list[tuple[str, dict[str, bytes]]] = []
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            while (member := tar.next()) is not None:
                tar.members.clear()  # type: ignore[attr-defined]  # keep no list of members
                key = grouper.key
                field = grouper.add(member.name) if member.isreg() else None
                if field is None:
                    continue
                if grouper.key != key:
                    samples.append((grouper.key, {}))  # type: ignore[arg-type]
                stop = member.offset_data + member.size
                if stop > len(data):
                    raise tarfile.ReadError(f"member {member.name!r} runs past the end of the piece")
                samples[-1][1][field] = view[member.offset_data : stop].tobytes()
    except (tarfile.TarError, ArgumentValueError) as error:
        where = f"after sample {samples[-1][0]!r}" if samples else "at its first sample"
        cause = f"cannot parse sample {first + len(samples)} of {path!r} ({where}): {error}"
        raise TarParseError(cause, DataFileError(
            f"{cause}. The shard is corrupt, or was rewritten after the TarStream indexed it; write it again.",
            path, first + len(samples),
        )) from error
    return samples


def samples_table(samples: list[tuple[str, dict[str, bytes]]], names: list[str], file: int) -> pa.Table:
    """``samples`` as a table of the columns ``names`` (``__key__`` first), plus the shard column."""
    columns: dict[str, pa.Array] = {KEY: pa.array([key for key, _ in samples], pa.string())}
    for name in names[1:]:
        columns[name] = pa.array([fields.get(name) for _, fields in samples], pa.large_binary())
    columns[SHARD] = pa.array([file] * len(samples), pa.int32())
    return pa.table(columns)
