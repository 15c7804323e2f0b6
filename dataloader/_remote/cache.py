"""A local directory of remote files, fetched whole once and read from the disk after that.

Each cached file is ``<digest of its URI>-<its name>``, with a small JSON
record beside it (``.json``): the remote file's size and version (modification
time and the store's ETag or version id, as the reader's stamp says) when it was fetched, and the copy's own size and modification time. A file
is fetched under an exclusive lock on its ``.lock`` file (``flock``), into a
temporary name, and renamed into place when whole, so workers and ranks that
share the directory fetch each file once, and none reads a partial copy.
A copy whose size or modification time no longer match its record
(truncated, rewritten) is fetched again; so is a copy of another version of
the remote file. Past ``limit`` bytes the least recently used copies are
deleted (the record's modification time is touched at each use); a reader
that still has a deleted copy open keeps reading it, as POSIX unlinking
allows. A cache folder deleted while a loader runs is made again; a disk that
is full or not writable is a :class:`~dataloader.CacheError` naming the folder,
never an error of the data file.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import posixpath
import threading
import zlib
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import pyarrow.fs as pafs

from ..errors import ArgumentValueError, CacheError, DataLoaderError, SourceChangedError

CHUNK = 16 * 2**20  # bytes per request when fetching
_RECORD_VERSION = 2  # 2: the remote file's version is its stamp's (time and tag), not its time alone


@dataclass(frozen=True)
class Fetched:
    """A cached copy ready to read: its local path and the remote file it was made from."""

    path: str
    size: int
    fetched: bool  # made by this call (False: found in the cache)


class ShardCache:
    """Remote files kept under ``directory``, at most ``limit`` bytes of them (None: no bound)."""

    def __init__(self, directory: str | os.PathLike[str], limit: int | None = None) -> None:
        self.directory = os.path.abspath(os.path.expanduser(os.fspath(directory)))
        self.limit = limit
        try:
            os.makedirs(self.directory, exist_ok=True)
        except OSError as error:
            raise ArgumentValueError(f"`cache_dir` {self.directory!r} cannot be made: {error}.") from error
        if not os.access(self.directory, os.W_OK | os.X_OK):
            raise ArgumentValueError(f"`cache_dir` {self.directory!r} is not writable by this process.")
        _remove_orphans(self.directory)

    def __reduce__(self) -> tuple[Any, ...]:
        return ShardCache, (self.directory, self.limit)

    def entry(self, filesystem: pafs.FileSystem, path: str) -> str:
        """Where the copy of ``path`` on ``filesystem`` lives (whether it is there or not)."""
        uri = f"{filesystem.type_name}://{path}"
        return os.path.join(self.directory, f"{hashlib.sha256(uri.encode()).hexdigest()[:20]}-{posixpath.basename(path)}")

    def fetch(
        self, filesystem: pafs.FileSystem, path: str, size: int | None, version: Any,
        check: Callable[[], None] | None = None,
    ) -> Fetched:
        """The local copy of ``path`` as it was when planned (``size``, and ``version``: plain
        values that differ between versions of the file, the reader's ``Stamp.version``),
        fetched unless a whole copy of that version is here already; ``check()`` runs before a
        fetch (to raise if the remote file is no longer that version)."""
        version = json.loads(json.dumps(version))  # as the record keeps it
        local = self.entry(filesystem, path)
        found = self._valid(local, size, version)
        if found is not None:
            return Fetched(local, found, False)
        try:
            return self._fetch(filesystem, path, local, size, version, check)
        except CacheError as error:
            if not isinstance(error.__cause__, FileNotFoundError):
                raise
        return self._fetch(filesystem, path, local, size, version, check)  # the folder went mid-fetch: again

    def _fetch(
        self, filesystem: pafs.FileSystem, path: str, local: str, size: int | None, version: Any,
        check: Callable[[], None] | None,
    ) -> Fetched:
        with self._on_disk(path, "make the cache folder"):
            os.makedirs(self.directory, exist_ok=True)  # deleted while the loader ran: made again
        with contextlib.ExitStack() as held:
            with self._on_disk(path, "lock the copy"):
                held.enter_context(_locked(local + ".lock"))
            found = self._valid(local, size, version)  # another process may have fetched it meanwhile
            if found is not None:
                return Fetched(local, found, False)
            if check is not None:
                check()
            written = self._download(filesystem, path, local, size, version)
        self._evict(keep=local)
        return Fetched(local, written, True)

    @contextlib.contextmanager
    def _on_disk(self, path: str, doing: str) -> Iterator[None]:
        """Turn an error of the local disk while ``doing`` into a :class:`CacheError` naming the
        folder (errors of the store, the library's own, pass as they are)."""
        try:
            yield
        except DataLoaderError:
            raise
        except OSError as error:
            raise cache_error(error, path, self.directory, doing) from error

    def _valid(self, local: str, size: int | None, version: Any) -> int | None:
        """The copy's size if ``local`` is a whole copy of that version of the remote file."""
        record = _read_record(local + ".json")
        if record is None or record.get("version") != _RECORD_VERSION:
            return None
        if record.get("remote_size") != size or record.get("remote_version") != version:
            return None  # another version of the remote file
        try:
            status = os.stat(local)
        except FileNotFoundError:
            return None
        if status.st_size != record.get("size") or status.st_mtime_ns != record.get("mtime_ns"):
            return None  # truncated, rewritten or replaced since it was fetched
        if _verified.get(local) != (status.st_ino, status.st_mtime_ns):
            if _crc32(local) != record.get("crc32"):
                return None  # corrupt on disk
            _verified[local] = (status.st_ino, status.st_mtime_ns)
        with contextlib.suppress(OSError):
            os.utime(local + ".json")  # most recently used
        return status.st_size

    def _download(self, filesystem: pafs.FileSystem, path: str, local: str, size: int | None, version: Any) -> int:
        temporary = f"{local}.part-{os.getpid()}-{threading.get_ident()}"
        crc = 0
        try:
            with filesystem.open_input_file(path) as source:
                total = source.size()
                if size is not None and total != size:
                    raise SourceChangedError(
                        f"{path!r} changed after the reader read its metadata (size {size} -> {total} "
                        "bytes) and cannot be cached as planned. Build the reader again to read the "
                        "file as it is now.",
                        path,
                    )
                with self._on_disk(path, "create the copy"):
                    target = open(temporary, "wb")  # noqa: SIM115 - closed below, on every path
                try:
                    offset = 0
                    while offset < total:
                        chunk = source.read_at(min(CHUNK, total - offset), offset)
                        if not chunk:  # would loop for ever: the file ended before its size
                            raise SourceChangedError(
                                f"{path!r} ended at byte {offset} while being cached, though it was "
                                f"{total} bytes when opened: it was cut or replaced meanwhile. Build "
                                "the reader again to read the file as it is now.",
                                path,
                            )
                        with self._on_disk(path, "write the copy"):
                            target.write(chunk)
                        crc = zlib.crc32(chunk, crc)
                        offset += len(chunk)
                    with self._on_disk(path, "write the copy"):
                        target.flush()
                        os.fsync(target.fileno())
                finally:
                    with contextlib.suppress(OSError):
                        target.close()
            with self._on_disk(path, "put the copy in place"):
                os.replace(temporary, local)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
        with self._on_disk(path, "record the copy"):
            status = os.stat(local)
            record = {
                "version": _RECORD_VERSION, "uri": path, "remote_size": size, "remote_version": version,
                "size": status.st_size, "mtime_ns": status.st_mtime_ns, "crc32": crc,
            }
            _write_record(local + ".json", record)
        _verified[local] = (status.st_ino, status.st_mtime_ns)
        return status.st_size

    def _evict(self, keep: str) -> None:
        """Delete the least recently used copies until the cache holds at most ``limit`` bytes."""
        if self.limit is None:
            return
        with contextlib.suppress(FileNotFoundError), _locked(os.path.join(self.directory, ".evict.lock")):
            entries = []
            for name in os.listdir(self.directory):
                if not name.endswith(".json"):
                    continue
                record_path = os.path.join(self.directory, name)
                local = record_path[: -len(".json")]
                try:
                    entries.append((os.stat(record_path).st_mtime_ns, local, os.stat(local).st_size))
                except FileNotFoundError:
                    continue
            total = sum(size for _, _, size in entries)
            for _, local, size in sorted(entries):
                if total <= self.limit:
                    break
                if local == keep or not _try_remove(local):
                    continue
                total -= size

    def discard(self, filesystem: pafs.FileSystem, path: str) -> None:
        """Delete the copy of ``path`` (found not to parse: made from a body cut short), unless
        another process is fetching it right now."""
        local = self.entry(filesystem, path)
        _verified.pop(local, None)
        with contextlib.suppress(OSError):
            _try_remove(local)

    def clear(self) -> None:
        """Delete every copy (for tests and for a user who wants the space back)."""
        for name in os.listdir(self.directory):
            with contextlib.suppress(FileNotFoundError, IsADirectoryError):
                os.unlink(os.path.join(self.directory, name))


# Copies whose checksum this process has checked: (inode, mtime) of the copy it checked.
_verified: dict[str, tuple[int, int]] = {}


def cache_error(error: OSError, path: str, directory: str, doing: str) -> CacheError:
    """The error a copy of remote ``path`` that the cache folder ``directory`` cannot take ends in."""
    cause = f"{type(error).__name__}: {error}"
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        message = (
            f"the cache folder {directory!r} is full: it cannot take the copy of {path!r} ({cause}). "
            "The remote file is fine. Free room on that disk, bound the cache with cache_limit= (least "
            "recently used copies are deleted to stay within it), or give cache_dir= a larger disk."
        )
    else:
        message = (
            f"the cache folder {directory!r} cannot take the copy of {path!r}: could not {doing} ({cause}). "
            "The remote file is fine. Check that the folder is on a writable disk that this process "
            "may write, or give cache_dir= another folder."
        )
    return CacheError(message, directory)


def _remove_orphans(directory: str) -> None:
    """Delete the partial files of fetches whose process is gone (killed mid-fetch)."""
    for name in os.listdir(directory):
        _, marker, owner = name.rpartition(".part-")
        if not marker:
            continue
        pid = owner.split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(directory, name))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _try_remove(local: str) -> bool:
    """Delete a copy and its record unless it is being fetched right now (its lock is held)."""
    descriptor = os.open(local + ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        for name in (local + ".json", local):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name)
        return True
    finally:
        os.close(descriptor)  # closing releases the lock


@contextlib.contextmanager
def _locked(name: str) -> Iterator[None]:
    """An exclusive ``flock`` on ``name``: blocks until no other process or thread holds it."""
    descriptor = os.open(name, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)


def _read_record(name: str) -> dict[str, Any] | None:
    try:
        with open(name, encoding="utf-8") as file:
            record = json.load(file)
    except (FileNotFoundError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _write_record(name: str, record: dict[str, Any]) -> None:
    temporary = f"{name}.part-{os.getpid()}-{threading.get_ident()}"
    with open(temporary, "w", encoding="utf-8") as file:
        json.dump(record, file)
    os.replace(temporary, name)


def _crc32(local: str) -> int:
    crc = 0
    with open(local, "rb") as file:
        while chunk := file.read(CHUNK):
            crc = zlib.crc32(chunk, crc)
    return crc
