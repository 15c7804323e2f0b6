"""The files a columnar reader was built on, and the checks that it still reads those files.

A reader plans from metadata read once (row-group counts, record-batch
counts): every process computes its rows from those numbers. A file replaced
or rewritten afterwards would be read through the old numbers, which loses or
repeats rows without an error. So each reader records every file's size,
modification time, the store's version tag (ETag, version id) where it has one
and, on a local disk, inode when it reads the metadata
(:func:`take_stamps`), checks
them again each time it opens the file (:func:`check_stamp`; Parquet readers
also compare the footer's row groups), and raises :class:`SourceChangedError`
naming the file when they differ. Errors while reading (a file deleted,
truncated, corrupt) become :class:`DataFileError` naming the file and the
row group (:func:`read_error`).
"""

from __future__ import annotations

import os
import uuid
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence, TypeVar

import pyarrow as pa
import pyarrow.fs as pafs

from .._digest import digest
from .._remote import GONE, FileVersion, ShardCache, call_parsing, file_versions, policy_of
from ..errors import DataFileError, DataLoaderError, SourceChangedError

Handle = TypeVar("Handle")

_REBUILD = (
    "Build the {kind} again to read the files as they are now (a saved loader state then refuses "
    "the old position), and while a loader reads, keep its files as they are: write new files "
    "under new names and build a new reader on them."
)


@dataclass(frozen=True)
class Stamp:
    """What a file was when its metadata was read: its size, modification time, the store's
    version tag (ETag, version id) where it gives one and, on a local disk, its identity
    (device, inode). Modification times tick with the kernel's coarse clock (a few ms), so a
    file replaced by one of the same size within a tick shows only in its inode."""

    size: int | None
    mtime_ns: int | None
    identity: tuple[int, int] | None = None
    tag: str | None = None
    # One per reader's remote stamps, read only where the store gives neither a time nor a tag
    # (``empty``): the cache keeps such a copy for that reader (and its workers) only. Not part
    # of the comparison.
    token: str | None = field(default=None, compare=False)

    @property
    def empty(self) -> bool:
        """A file whose store says nothing but its size: a same-size replacement cannot show."""
        return self.size is not None and self.mtime_ns is None and self.tag is None

    @property
    def version(self) -> list[Any]:
        """What the cache records to tell this version of the file from others."""
        return ["unstamped", self.token] if self.empty else [self.mtime_ns, self.tag]


_GONE = Stamp(None, None)  # the stamp of a path where no file is


def take_stamps(filesystem: pafs.FileSystem, paths: Sequence[str], kind: str | None = None) -> list[Stamp]:
    """The stamps of ``paths`` (for remote files, one request per file). ``kind`` (when a reader
    is built) warns where the store gives no modification time or version tag."""
    if isinstance(filesystem, pafs.LocalFileSystem):
        return [_local_stamp(path) for path in paths]
    token = uuid.uuid4().hex
    stamps = [_stamp(version, token) for version in file_versions(filesystem, paths)]
    unstamped = next((path for path, stamp in zip(paths, stamps) if stamp.empty), None)
    if kind is not None and unstamped is not None:
        _warn_unstamped(filesystem, unstamped, kind)
    return stamps


def stamps_fingerprint(stamps: Sequence[Stamp]) -> str:
    """What the files hold, in a few words for a saved state: their sizes and versions (time
    and tag; not the inode, so the same files copied with their times, ``cp -p``, match)."""
    total = sum(stamp.size or 0 for stamp in stamps)
    unstamped = sum(stamp.empty for stamp in stamps)
    note = f", {unstamped} without a time or tag" if unstamped else ""
    return f"{total} bytes{note}, {digest([[s.size, s.mtime_ns, s.tag] for s in stamps])}"


def _warn_unstamped(filesystem: pafs.FileSystem, path: str, kind: str) -> None:
    warnings.warn(
        f"{kind}: the filesystem ({filesystem.type_name}) gives no modification time, ETag or version "
        f"id for {path!r} (and maybe others), only its size. A file replaced by one of the same size "
        "while the loader reads, or before a saved state is loaded, cannot be noticed; the cache "
        "(cache_dir) keeps such a copy for this reader only. Keep the files as they are while they "
        "are read, or use a filesystem that reports modification times.",
        UserWarning,
        stacklevel=4,
    )


def check_stamp(filesystem: pafs.FileSystem, path: str, stamp: Stamp, kind: str) -> None:
    """Raise unless ``path`` is still the file it was in ``stamp``."""
    [now] = take_stamps(filesystem, [path])
    if now == _GONE:
        raise DataFileError(
            f"{path!r} is gone: it was deleted or moved after the {kind} read its metadata. "
            + _REBUILD.format(kind=kind),
            path,
        )
    if now != stamp:
        replaced = ", replaced by another file" if now.identity != stamp.identity else ""
        tagged = f", version {stamp.tag} -> {now.tag}" if now.tag != stamp.tag else ""
        raise SourceChangedError(
            f"{path!r} changed after the {kind} read its metadata (size {stamp.size} -> {now.size} "
            f"bytes, modified at {stamp.mtime_ns} -> {now.mtime_ns} ns{tagged}{replaced}): reading it through the old "
            "row counts would lose or repeat rows. " + _REBUILD.format(kind=kind),
            path,
        )


def open_checked(
    open_file: Callable[[], Handle], close: Callable[[Handle], None], counts: Callable[[Handle], list[int] | None],
    filesystem: pafs.FileSystem, path: str, stamp: Stamp, planned: Sequence[int], kind: str, what: str = "row groups",
    recheck: bool = True,
) -> Handle:
    """``open_file()``, checked to be the file planned with: its stamp (unless ``recheck`` is
    False: checked already in this iteration), and its units' row counts (``counts``, None where
    too costly to know) against ``planned``. A failed open is told by what changed when the file
    did, else as a read error; a handle that fails a check is closed."""
    try:
        handle = open_file()
    except Exception as error:
        check_stamp(filesystem, path, stamp, kind)  # the likelier cause
        raise read_error(error, path, kind) from error
    check = (lambda: check_stamp(filesystem, path, stamp, kind)) if recheck else (lambda: None)
    return _checked(handle, close, check, counts, path, planned, kind, what)


def _checked(
    handle: Handle, close: Callable[[Handle], None], check: Callable[[], None],
    counts: Callable[[Handle], list[int] | None], path: str, planned: Sequence[int], kind: str, what: str,
) -> Handle:
    """``handle`` after ``check()`` and the check of its units' row counts; closed if either fails."""
    try:
        check()
        found = counts(handle)
        if found is not None:
            check_counts(path, planned, found, kind, what)
    except BaseException:
        close(handle)
        raise
    return handle


def open_cached(
    cache: ShardCache, open_file: Callable[[pafs.FileSystem, str], Handle], close: Callable[[Handle], None],
    counts: Callable[[Handle], list[int] | None], filesystem: pafs.FileSystem, path: str, stamp: Stamp,
    planned: Sequence[int], kind: str, what: str = "row groups",
) -> Handle:
    """``open_file`` on the local copy of remote ``path``, fetched first unless ``cache`` has
    that version whole; its units' row counts are checked as :func:`open_checked` does. The copy
    is of the planned version (the cache checks the version), so no request goes to the store
    when it is there; before a fetch the remote file's stamp is checked."""
    local = pafs.LocalFileSystem()
    for _ in range(3):  # a copy evicted by another process between fetch and open is fetched again
        copy = cache.fetch(filesystem, path, stamp.size, stamp.version, lambda: check_stamp(filesystem, path, stamp, kind))
        try:
            handle = open_file(local, copy.path)
        except FileNotFoundError:
            continue
        except Exception as error:
            raise read_error(error, path, kind) from error
        return _checked(handle, close, lambda: None, counts, path, planned, kind, what)
    raise read_error(FileNotFoundError(f"its cached copy in {cache.directory} kept being evicted"), path, kind)


def check_counts(path: str, planned: Sequence[int], found: Sequence[int], kind: str, what: str = "row groups") -> None:
    """Raise unless a file opened again has the units (row counts per unit) it was planned with."""
    if list(planned) != list(found):
        raise SourceChangedError(
            f"{path!r} changed after the {kind} read its metadata: it had {len(planned)} {what} of "
            f"{sum(planned)} rows and now has {len(found)} of {sum(found)}; reading it through the "
            "old counts would lose or repeat rows. " + _REBUILD.format(kind=kind),
            path,
        )


def parsing(request: Callable[[], Handle], filesystem: pafs.FileSystem, what: str, again: Callable[[], None] = lambda: None) -> Handle:
    """``request()``, which parses bytes of a file on ``filesystem``: on a remote one, read again
    while it fails to parse (a body cut short on the way shows only so; see
    :func:`~dataloader._remote.call_parsing`), then a ``RemoteReadError``; local files once."""
    policy = policy_of(filesystem)
    if policy is None:
        return request()
    return call_parsing(request, what, policy, unparsed, again)


def unparsed(error: BaseException) -> bool:
    """Whether ``error`` is a failure to parse bytes read (the library's read error of a corrupt
    file included), not a missing or changed file, a failed request or a bug."""
    if type(error) is DataFileError and error.__cause__ is not None:
        error = error.__cause__
    if isinstance(error, (DataLoaderError, FileNotFoundError)):
        return False
    return isinstance(error, (pa.ArrowException, OSError, EOFError, ValueError))


def read_error(
    error: BaseException, path: str, kind: str, unit: int | None = None, what: str = "row group"
) -> BaseException:
    """``error``, raised while opening or reading ``path``, as the library's error naming the
    file and the unit; the library's own errors and non-I/O errors are returned as they are."""
    if isinstance(error, DataLoaderError) or not isinstance(error, (OSError, pa.ArrowException)):
        return error
    place = f"{what} {unit} of {path!r}" if unit is not None else repr(path)
    cause = " ".join(str(error).split()).rstrip(".")  # pyarrow's text spans lines
    if isinstance(error, FileNotFoundError):
        return DataFileError(
            f"cannot read {place}: the file is gone ({cause}). It was deleted or moved after the "
            f"{kind} read its metadata. " + _REBUILD.format(kind=kind),
            path, unit,
        )
    return DataFileError(
        f"cannot read {place}: {cause}. The file is corrupt, or it was truncated or rewritten "
        f"while the {kind} read it. Check it with pyarrow (pyarrow.parquet.ParquetFile(path) for "
        "Parquet), then write it again from its source; while a loader reads, write new files "
        "under new names instead of rewriting them in place.",
        path, unit,
    )


def _stamp(version: FileVersion, token: str) -> Stamp:
    if version == GONE:
        return _GONE
    return Stamp(version.size, version.mtime_ns, None, version.tag, token)


def _local_stamp(path: str) -> Stamp:
    """A local file's stamp, from one ``stat`` (pyarrow's listing shows no inode)."""
    try:
        status = os.stat(path)
    except FileNotFoundError:
        return _GONE
    return Stamp(status.st_size, status.st_mtime_ns, (status.st_dev, status.st_ino))
