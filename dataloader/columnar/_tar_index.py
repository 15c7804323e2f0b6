"""Where each sample of a WebDataset tar shard begins: the index that makes a piece one ranged read.

A WebDataset shard is a plain tar whose members are grouped into samples by
key: ``dir/abc.jpg``, ``dir/abc.cls`` -> key ``dir/abc``, fields ``jpg`` and
``cls`` (the key is the name up to the first dot of its last part, the field
the rest, so ``abc.seg.png`` is field ``seg.png``). A sample's members are
consecutive. Directories, links and other non-regular members, names without
a dot and macOS ``._*`` junk are skipped.

A shard's :class:`TarIndex` holds the byte offset of each sample's first
header (a pax or GNU long-name header included), where the last sample ends,
the fields seen and the shard's size. ``write_tar_shards`` stores it beside
the shard as ``<shard>.idx`` (a small JSON file); a shard without one, or
with one recorded for another size, is scanned: read once from start to end
as a stream, headers parsed by :mod:`tarfile`, data skipped.

On object storage a body cut short on the way can come back as if whole
(pyarrow's S3 leaves the missing tail unfilled; the library's reads fill it with
0xff bytes, never another read's bytes), so a remote sidecar that does
not parse, a shard's end that is not where its index says, and a scan that
does not parse are read again (:func:`._snapshot.parsing`) before they count.
A tail of zeros would read as tar's end-of-archive blocks, so a scan
also reads the bytes from its end-of-archive marker to the shard's end again
(:func:`check_after_end`): tar writers put only zeros there (two blocks, then
up to the record size: 10 KiB with GNU tar's default and Python's tarfile, which
WebDataset and write_tar_shards use; zeros of any length pass), and anything
else is either a cut read (read again) or samples a scan would lose.
"""

from __future__ import annotations

import json
import posixpath
import tarfile
from dataclasses import dataclass
from typing import Any, Iterator

import pyarrow.fs as pafs

from ..errors import ArgumentValueError, DataFileError
from ._snapshot import parsing

SIDECAR_SUFFIX = ".idx"
FORMAT = "dataloader.tar-index"
VERSION = 1
BLOCK = tarfile.BLOCKSIZE
_SKIP_CHUNK = 1 << 20  # bytes read at a time while skipping a member's data in a scan
# A compressed tar starts with its compressor's magic bytes: (magic, name, the command that undoes it).
_COMPRESSED = ((b"\x1f\x8b", "gzip", "gunzip"), (b"BZh", "bzip2", "bunzip2"),
               (b"\xfd7zXZ\x00", "xz", "unxz"), (b"\x28\xb5\x2f\xfd", "zstd", "unzstd"))


@dataclass(frozen=True)
class TarIndex:
    """A shard's samples: ``offsets[i]`` is where sample ``i``'s first header begins, ``end`` where
    the last sample's data ends (padded to 512 bytes); ``size`` is the shard's size when indexed."""

    offsets: tuple[int, ...]
    end: int
    fields: tuple[str, ...]
    size: int

    @property
    def samples(self) -> int:
        return len(self.offsets)

    def span(self, start: int, stop: int) -> tuple[int, int]:
        """The bytes [begin, end) that hold samples ``start`` to ``stop - 1``."""
        return self.offsets[start], self.offsets[stop] if stop < len(self.offsets) else self.end

    def to_json(self) -> str:
        return json.dumps({
            "format": FORMAT, "version": VERSION, "size": self.size, "end": self.end,
            "fields": list(self.fields), "offsets": list(self.offsets),
        }, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> "TarIndex | None":
        """The index a sidecar holds, or None for one of another format or version, or garbled."""
        try:
            return cls._parsed(text)
        except TarBytesError:
            return None

    @classmethod
    def _parsed(cls, text: str | bytes) -> "TarIndex | None":
        """The index a sidecar holds, None for one of another format or version; a garbled one
        (perhaps cut short on the way) is :class:`TarBytesError`."""
        try:
            data = json.loads(text)
            if data.get("format") != FORMAT or data.get("version") != VERSION:
                return None
            offsets = tuple(int(n) for n in data["offsets"])
            return cls(offsets, int(data["end"]), tuple(str(f) for f in data["fields"]), int(data["size"]))
        except (ValueError, TypeError, KeyError, AttributeError) as error:
            raise TarBytesError(f"its index does not parse ({type(error).__name__}: {error})") from error


class TarBytesError(ValueError):
    """Bytes of a shard or of its index that do not read as they should: a corrupt or stale file,
    or (remote) a body cut short on the way. The message is the cause, without advice: callers
    add the advice that fits (read again, scan, write the shard again)."""


def split_name(name: str) -> tuple[str, str] | None:
    """(key, field) of member ``name``, or None for a member that belongs to no sample."""
    directory, base = posixpath.split(name)
    if base.startswith("._") or "." not in base:
        return None
    stem, field = base.split(".", 1)
    if not stem or not field:
        return None
    return (posixpath.join(directory, stem) if directory else stem), field


class SampleGrouper:
    """Groups a shard's members into samples as they come, checking that each key is one run."""

    def __init__(self, shard: str) -> None:
        self.shard = shard
        self.key: str | None = None
        self.fields: set[str] = set()
        self._seen: set[str] = set()
        self._current: set[str] = set()

    def add(self, name: str) -> str | None:
        """Record member ``name`` and return its field (None: it belongs to no sample); ``self.key``
        is then the key of the sample it belongs to, a new one when the key changed."""
        parts = split_name(name)
        if parts is None:
            return None
        key, field = parts
        if key != self.key:
            if key in self._seen:
                raise ArgumentValueError(
                    f"{self.shard!r} is not a WebDataset shard: the members of sample {key!r} are not "
                    "consecutive (a sample's files must follow each other in the tar). Write the tar "
                    "with each sample's files together (write_tar_shards does)."
                )
            self._seen.add(key)
            self.key, self._current = key, set()
        if field in self._current:
            raise ArgumentValueError(
                f"{self.shard!r} holds {key}.{field} twice; each field of a sample must be one member."
            )
        self._current.add(field)
        self.fields.add(field)
        return field


def scan(stream: Any, shard: str, size: int) -> tuple[TarIndex, int]:
    """The index of the tar read sequentially from ``stream`` (``size`` bytes long) and the offset
    of its end-of-archive marker; bytes that do not read as a tar are :class:`TarBytesError`."""
    reader = _ForwardReader(stream)
    _check_uncompressed(reader.read(BLOCK), shard)
    reader.seek(0)  # within the block just read
    grouper = SampleGrouper(shard)
    offsets: list[int] = []
    end = 0
    try:
        with tarfile.open(fileobj=reader, mode="r:") as tar:  # type: ignore[call-overload]
            for member in _members(tar):
                key = grouper.key
                if member.isreg() and grouper.add(member.name) is not None:
                    if grouper.key != key:
                        offsets.append(member.offset)
                    end = member.offset_data + _padded(member.size)
            tail, archive_end = reader.last_read, tar.offset  # the block that ended it, and where
    except (tarfile.TarError, EOFError, OSError) as error:
        raise TarBytesError(str(error)) from error
    if len(tail) < BLOCK or tail.count(0) != BLOCK:
        raise TarBytesError("the end-of-archive block is missing: the file is truncated")
    return TarIndex(tuple(offsets), end, tuple(sorted(grouper.fields)), size), archive_end


def _check_uncompressed(head: bytes, shard: str) -> None:
    """Refuse a compressed tar (``.tar.gz``, ``.tgz``...): its samples are not at byte offsets of
    the file, so no ranged read could find them. ``head`` is the file's first block."""
    for magic, name, command in _COMPRESSED:
        if head.startswith(magic) and not _is_tar_header(head):
            raise DataFileError(
                f"{shard!r} is a {name}-compressed tar, and TarStream reads uncompressed tar shards "
                f"(a run of samples is one ranged read of the file's bytes). Decompress it "
                f"(`{command} -c FILE > NAME.tar`) and read the .tar, or write the shards with write_tar_shards.",
                shard,
            )


def _is_tar_header(block: bytes) -> bool:
    try:
        tarfile.TarInfo.frombuf(block, "utf-8", "surrogateescape")  # checks the header's checksum
    except tarfile.TarError:
        return False
    return True


def _members(tar: tarfile.TarFile) -> Iterator[tarfile.TarInfo]:
    """The tar's members, without keeping them all (TarFile's own iteration lists every one)."""
    while True:
        member = tar.next()
        if member is None:
            return
        tar.members.clear()  # type: ignore[attr-defined]  # TarFile lists every member it read
        yield member


def _padded(size: int) -> int:
    return -(-size // BLOCK) * BLOCK


def not_a_tar(shard: str, error: BaseException) -> ArgumentValueError:
    """The error of a shard that does not read as a tar (``error`` says why)."""
    return ArgumentValueError(_not_a_tar(shard, str(error)))


def _not_a_tar(shard: str, cause: str) -> str:
    return (
        f"cannot read {shard!r} as a tar shard ({cause}). Check it with `tar -tf`; write it again "
        "from its source, or leave it out of the source."
    )


class _ForwardReader:
    """A file object over a sequential stream for :mod:`tarfile`: forward seeks read and drop the
    bytes between, a seek back stays within the last block read (tarfile looks one byte back)."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.position = 0
        self.last_read = b""  # what the last read() returned
        self._back = b""  # the last bytes read, for a short seek back
        self._again = b""  # bytes a seek back made to be read again

    def read(self, size: int = -1) -> bytes:
        if size < 0:
            raise OSError("a tar shard is read in blocks, never to its end at once")
        again, self._again = self._again[:size], self._again[size:]
        data = again + (self.stream.read(size - len(again)) if size > len(again) else b"")
        self.position += len(data)
        self._back = (self._back + data)[-BLOCK:]
        self.last_read = data
        return data

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = 0) -> int:
        target = offset if whence == 0 else self.position + offset
        if target < self.position:
            back = self.position - target
            if back > len(self._back):
                raise OSError("a tar shard is read in one pass; it cannot seek back that far")
            self._again = self._back[-back:] + self._again
            self._back = self._back[:-back]
            self.position = target
        while self.position < target:
            if not self.read(min(_SKIP_CHUNK, target - self.position)):
                break  # past the end: tarfile's next read finds nothing and reports it
        return self.position


def read_sidecar(filesystem: pafs.FileSystem, path: str, size: int | None) -> TarIndex | None:
    """The sidecar index of shard ``path`` when there is one recorded for a shard of ``size`` bytes
    whose end is where the index says (:func:`_ends_as_indexed`). On a remote store, a sidecar
    that does not parse or an end that does not match is read again first (a cut body); when it
    stays so, None (the shard is scanned)."""
    try:
        return parsing(lambda: _sidecar(filesystem, path, size), filesystem, f"the index of {path!r}")
    except (OSError, TarBytesError):  # a missing sidecar; a RemoteReadError too: the scan tells
        return None


def _sidecar(filesystem: pafs.FileSystem, path: str, size: int | None) -> TarIndex | None:
    with filesystem.open_input_stream(path + SIDECAR_SUFFIX) as stream:
        index = TarIndex._parsed(stream.read())
    if index is None or index.size != size:
        return None
    if not _ends_as_indexed(filesystem, path, index):
        raise TarBytesError(f"{path!r} does not end where its index says")
    return index


def _ends_as_indexed(filesystem: pafs.FileSystem, path: str, index: TarIndex) -> bool:
    """Whether the shard's last indexed sample starts with a tar header and the end-of-archive
    blocks follow where the index says the samples end. Tar files are padded to records of 10
    KiB, so a shard rewritten with more samples often keeps its size: with a size check alone its
    old index would hide the samples past its old end, without an error. One ranged read."""
    start = index.offsets[-1] if index.offsets else index.end
    with filesystem.open_input_file(path) as file:
        tail = bytes(file.read_at(index.end + 2 * BLOCK - start, start))
    ending = tail[index.end - start:]
    if len(ending) != 2 * BLOCK or any(ending):
        return False
    if not index.offsets:
        return True
    try:
        tarfile.TarInfo.frombuf(tail[:BLOCK], "utf-8", "surrogateescape")  # checks the header's checksum
    except tarfile.HeaderError:
        return False
    return True


def index_shard(filesystem: pafs.FileSystem, path: str, size: int | None) -> TarIndex:
    """Shard ``path``'s index: its sidecar's when current, else from a scan (on a remote store, a
    scan that does not parse is read again, then a ``RemoteReadError``)."""
    index = read_sidecar(filesystem, path, size)
    if index is not None:
        return index
    if size is None:
        size = filesystem.get_file_info(path).size or 0
    try:
        return parsing(lambda: scanned(filesystem, path, size), filesystem, f"{path!r}, scanned for its samples")
    except DataAfterEndError as error:  # a local file, read once
        raise error.local from error
    except TarBytesError as error:  # a local file, read once
        raise not_a_tar(path, error) from error.__cause__
    except (ArgumentValueError, DataFileError):
        raise
    except OSError as error:
        raise not_a_tar(path, error) from error


def scanned(
    filesystem: pafs.FileSystem, path: str, size: int, source: tuple[pafs.FileSystem, str] | None = None,
) -> TarIndex:
    """The index of shard ``path`` from a scan; bytes that do not read as a tar, or that are not
    zeros after its end-of-archive marker (:func:`check_after_end`), are :class:`TarBytesError`.
    ``source`` is (filesystem, path) of the remote shard that ``path`` is a local copy of: the
    bytes after the marker are read again there."""
    # compression=None: the file's own bytes (pyarrow would inflate a .gz name; the reads could not)
    with filesystem.open_input_stream(path, compression=None) as stream:
        index, archive_end = scan(stream, path, size)
    check_after_end(*(source or (filesystem, path)), archive_end, size)
    return index


def check_after_end(filesystem: pafs.FileSystem, path: str, archive_end: int, size: int) -> None:
    """Read the bytes from the end-of-archive marker at ``archive_end`` to the shard's end again
    (in a tar as writers write it, two blocks and the record's padding: one ranged read of at most
    ~10 KiB) and raise :class:`DataAfterEndError` where they are not all zeros. A read of a header
    cut short on the way could come back as zeros (pyarrow's S3 leaves a short body's tail as its
    buffer held it; the retrying filesystem fills it with 0xff): the scan would take it for the
    marker and lose the samples after it without an error; a fresh read of those bytes is not zeros. On a local disk, the same check refuses
    data after the marker (tars joined with ``cat``) that a scan would otherwise drop."""
    with filesystem.open_input_file(path) as file:
        offset = archive_end
        while offset < size:
            chunk = file.read_at(min(_SKIP_CHUNK, size - offset), offset)
            if not chunk:
                return  # shorter than planned: the stamps' checks name a changed file
            if chunk.count(0) != len(chunk):
                first = offset + len(chunk) - len(chunk.lstrip(b"\0"))
                raise DataAfterEndError(path, archive_end, first, size)
            offset += len(chunk)


class DataAfterEndError(TarBytesError):
    """Bytes other than zeros after a shard's end-of-archive marker: the cause as the message
    (what a ``RemoteReadError`` quotes after the retries), and ``local``, the error of a file read
    once, with its advice."""

    def __init__(self, path: str, archive_end: int, first: int, size: int) -> None:
        cause = (f"bytes that are not zeros follow its end-of-archive marker at byte {archive_end}, "
                 f"from byte {first} of {size}")
        super().__init__(cause)
        self.local = DataFileError(
            f"cannot index {path!r}: {cause}. A scan stops at the marker, as tar does, so whatever "
            "follows would be lost without an error: most often a second tar joined on with `cat` "
            "(`tar -tf --ignore-zeros FILE` lists both). Write its samples as one tar (extract them "
            "with `tar -xf FILE --ignore-zeros` and tar them again, or use write_tar_shards), or, if "
            f"what follows is junk, cut it off (`truncate -s {archive_end + 2 * BLOCK} FILE`).",
            path,
        )
