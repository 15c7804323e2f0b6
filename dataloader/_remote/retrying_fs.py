"""A ``pyarrow.fs`` filesystem that repeats the requests of another one when they fail transiently.

Every call the readers make -- listing, file information, opening, each read
-- goes through :func:`~.retry.call_with_retries`. A read is repeated at the
same offset on a freshly opened file, so a connection reset in the middle of
a row group costs that range again, not the epoch. Reads address byte ranges
(``read_at``), which repeat safely however far a failed attempt got.
"""

from __future__ import annotations

import collections
import os
import pickle
import threading
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from .retry import RetryPolicy, call_with_retries

# Files a filesystem keeps open for its readers (each open asks the store for the file's size).
OPEN_FILES = 64
# What the bytes a read was cut short of read as: no tar header, end-of-archive block, Parquet
# footer or JSON sidecar parses from a run of them.
CUT_FILL = b"\xff"


def retrying(filesystem: pafs.FileSystem, policy: RetryPolicy) -> pafs.FileSystem:
    """``filesystem`` behind retries (already so: as it is)."""
    if isinstance(filesystem, pafs.PyFileSystem) and isinstance(filesystem.handler, RetryingHandler):
        return filesystem
    return pafs.PyFileSystem(RetryingHandler(filesystem, policy))


def policy_of(filesystem: pafs.FileSystem) -> RetryPolicy | None:
    """The retry policy of a :func:`retrying` filesystem (None for others: local, not repeated)."""
    if isinstance(filesystem, pafs.PyFileSystem) and isinstance(filesystem.handler, RetryingHandler):
        return filesystem.handler.policy
    return None


def unwrapped(filesystem: pafs.FileSystem) -> pafs.FileSystem:
    """The filesystem a :func:`retrying` one repeats requests to (others as they are)."""
    if isinstance(filesystem, pafs.PyFileSystem) and isinstance(filesystem.handler, RetryingHandler):
        return filesystem.handler.inner
    return filesystem


class RetryingHandler(pafs.FileSystemHandler):  # type: ignore[misc]
    """The handler of a :func:`retrying` filesystem: reads repeat, writes pass straight through.

    In a forked process the filesystem is made again from its pickle before its first use: the
    copy inherited from the parent would share the parent's open connections (its HTTP client's
    pool) with it, and two processes reading one socket get each other's bytes.
    """

    def __init__(self, inner: pafs.FileSystem, policy: RetryPolicy) -> None:
        self._inner, self.policy = inner, policy
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._files: collections.OrderedDict[str, pa.NativeFile] = collections.OrderedDict()
        self._opening: dict[str, threading.Lock] = {}

    @property
    def inner(self) -> pafs.FileSystem:
        """The filesystem requests go to, this process's own."""
        if self._pid != os.getpid():
            self._inner, self._pid = pickle.loads(pickle.dumps(self._inner)), os.getpid()
            self._lock, self._files, self._opening = threading.Lock(), collections.OrderedDict(), {}
        return self._inner

    def inner_file(self, path: str) -> pa.NativeFile:
        """``path`` opened on the inner filesystem, once for all the threads that read it (its
        ``read_at`` is safe to share): opening asks the store for the size each time, a request
        as costly as reading a row group from a server that answers few requests per second."""
        inner = self.inner
        with self._lock:
            opening = self._opening.setdefault(path, threading.Lock())
        with opening:  # a second thread asking for the path waits for the first one's file
            with self._lock:
                file = self._files.pop(path, None)
                if file is not None:
                    self._files[path] = file
                    return file
            file = inner.open_input_file(path)
            with self._lock:
                self._files[path] = file
                self._opening.pop(path, None)
                while len(self._files) > OPEN_FILES:
                    self._files.popitem(last=False)  # closed when its last reader lets go
            return file

    def forget(self, path: str, file: pa.NativeFile) -> None:
        """Drop ``path``'s shared file after a failed read, so the next read opens it again."""
        with self._lock:
            if self._files.get(path) is file:
                del self._files[path]

    def __reduce__(self) -> tuple[Any, ...]:
        return RetryingHandler, (self._inner, self.policy)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RetryingHandler) and self.inner.equals(other.inner) and self.policy == other.policy

    def __ne__(self, other: object) -> bool:
        return not self == other

    def get_type_name(self) -> str:
        return f"retrying-{self.inner.type_name}"

    def normalize_path(self, path: str) -> str:
        return self.inner.normalize_path(path)  # type: ignore[no-any-return]

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        what = f"the information of {paths[0]!r}" + (f" and {len(paths) - 1} more objects" if len(paths) > 1 else "")
        return call_with_retries(lambda: self.inner.get_file_info(paths), what, self.policy)

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        return call_with_retries(
            lambda: self.inner.get_file_info(selector), f"the listing of {selector.base_dir!r}", self.policy
        )

    def open_input_file(self, path: str) -> pa.NativeFile:
        return pa.PythonFile(_RetryingInput(self, path), mode="r")

    def open_input_stream(self, path: str) -> pa.NativeFile:
        return self.open_input_file(path)

    # Writing is not the readers' business: straight through, once.
    def create_dir(self, path: str, recursive: bool) -> None:
        self.inner.create_dir(path, recursive=recursive)

    def delete_dir(self, path: str) -> None:
        self.inner.delete_dir(path)

    def delete_dir_contents(self, path: str, missing_dir_ok: bool = False) -> None:
        self.inner.delete_dir_contents(path, missing_dir_ok=missing_dir_ok)

    def delete_root_dir_contents(self) -> None:
        self.inner.delete_dir_contents("/", accept_root_dir=True)

    def delete_file(self, path: str) -> None:
        self.inner.delete_file(path)

    def move(self, src: str, dest: str) -> None:
        self.inner.move(src, dest)

    def copy_file(self, src: str, dest: str) -> None:
        self.inner.copy_file(src, dest)

    def open_output_stream(self, path: str, metadata: Any) -> pa.NativeFile:
        return self.inner.open_output_stream(path, metadata=metadata)

    def open_append_stream(self, path: str, metadata: Any) -> pa.NativeFile:
        return self.inner.open_append_stream(path, metadata=metadata)


class _RetryingInput:
    """A readable, seekable file object over ``inner``'s file ``path`` whose reads repeat.

    It keeps its own position and asks for byte ranges, so a repeated read starts where the
    failed one did, on a file opened again (a reset connection leaves the old one unusable).
    """

    def __init__(self, handler: RetryingHandler, path: str) -> None:
        self._handler, self._path, self._policy = handler, path, handler.policy
        self._file: pa.NativeFile | None = None
        self._position = 0
        self.closed = False
        self._size = call_with_retries(lambda: self._handle().size(), f"the size of {path!r}", self._policy)

    def _handle(self) -> pa.NativeFile:
        if self._file is None:
            self._file = self._handler.inner_file(self._path)
        return self._file

    def _drop(self) -> None:
        file, self._file = self._file, None
        if file is not None:
            self._handler.forget(self._path, file)  # the shared file may be broken: the next read opens another

    def _read_at(self, size: int, offset: int) -> Any:
        try:
            data = _read_into_fill(self._handle(), size, offset)
        except BaseException:
            self._drop()
            raise
        if len(data) < size and offset + len(data) < self._size:
            self._drop()  # a short body: the connection ended early
            raise ConnectionResetError(f"got {len(data)} of {size} bytes at offset {offset}")
        return data

    def read(self, size: int | None = -1) -> Any:
        start = self._position
        if size is None or size < 0:
            size = self._size - start
        size = max(0, min(size, self._size - start))
        if size == 0:
            return b""
        what = f"{self._path!r} (bytes {start} to {start + size})"
        data = call_with_retries(lambda: self._read_at(size, start), what, self._policy)
        self._position = start + len(data)
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self._position, 2: self._size}[whence]
        self._position = base + offset
        return self._position

    def tell(self) -> int:
        return self._position

    def size(self) -> int:
        return self._size  # type: ignore[no-any-return]

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def writable(self) -> bool:
        return False

    def close(self) -> None:
        self._file = None  # the shared file stays open for the next reader of the path
        self.closed = True


def _read_into_fill(file: pa.NativeFile, size: int, offset: int) -> pa.Buffer:
    """``size`` bytes of ``file`` from ``offset``, read into a buffer of :data:`CUT_FILL` bytes.
    A body cut short on the way can come back as if whole (pyarrow's S3 takes the
    Content-Length's word and hands over its buffer): the missing bytes are then ``CUT_FILL``,
    which the formats' checks refuse and the readers read again, never what the allocator's
    memory last held (another file's bytes, which parse as well as the real ones) or zeros (a
    tar's end-of-archive blocks)."""
    buffer = bytearray(CUT_FILL) * size
    got = file.get_stream(offset, size).readinto(buffer)
    return pa.py_buffer(buffer)[:got]
