"""What a store says a file is now: its size, its modification time and its version tag.

pyarrow's own filesystems give a size and a modification time. An fsspec
filesystem behind ``pyarrow.fs.FSSpecHandler`` gives the size only, plus the
``mtime`` key that the local filesystem has and s3fs, gcsfs or adlfs lack:
their ``info()`` says ``LastModified``/``updated``/``last_modified``, and an
``ETag``, ``VersionId`` or ``generation`` that changes with every upload. So
for those the version is read from the fsspec filesystem itself, one
``info()`` per file as before (behind the retries), with its listing cache
dropped first: a cached answer would show the file as it was.
"""

from __future__ import annotations

import datetime
import functools
from dataclasses import dataclass
from typing import Any, Sequence

import pyarrow.fs as pafs

from .filesystems import is_fsspec
from .retry import RetryPolicy, call_with_retries
from .retrying_fs import policy_of, unwrapped

# Keys of an fsspec info() that carry a modification time, and a version of the object, by store.
_TIME_KEYS = ("mtime", "LastModified", "last_modified", "updated", "modified", "created")
_TAG_KEYS = ("ETag", "etag", "VersionId", "version_id", "generation")


@dataclass(frozen=True)
class FileVersion:
    """A file as its store describes it; ``size`` None: no file there."""

    size: int | None
    mtime_ns: int | None
    tag: str | None = None  # the store's ETag / version id / generation, joined


GONE = FileVersion(None, None)


def file_versions(filesystem: pafs.FileSystem, paths: Sequence[str]) -> list[FileVersion]:
    """The version of each of ``paths`` on ``filesystem`` (a pyarrow one, maybe retrying)."""
    fs = fsspec_behind(unwrapped(filesystem))
    if fs is None:
        return [_from_file_info(info) for info in filesystem.get_file_info(list(paths))]
    policy = policy_of(filesystem) or RetryPolicy(retries=0)
    return [call_with_retries(functools.partial(_fsspec_version, fs, path), f"the information of {path!r}", policy)
            for path in paths]


def drop_listing(filesystem: pafs.FileSystem, path: str) -> None:
    """Forget what an fsspec filesystem (s3fs, gcsfs: listings cached for the process's life by
    default) has cached about ``path`` and below, so that a reader built now lists it as it is."""
    fs = fsspec_behind(unwrapped(filesystem))
    if fs is not None:
        fs.invalidate_cache(path)


def fsspec_behind(filesystem: pafs.FileSystem) -> Any:
    """The fsspec filesystem a pyarrow ``FSSpecHandler`` wraps (None for any other filesystem)."""
    if isinstance(filesystem, pafs.PyFileSystem):
        fs = getattr(filesystem.handler, "fs", None)
        if is_fsspec(fs):
            return fs
    return None


def _fsspec_version(fs: Any, path: str) -> FileVersion:
    fs.invalidate_cache(path)
    try:
        info = fs.info(path)
    except FileNotFoundError:
        return GONE
    if info.get("type") != "file":
        return GONE
    mtime = next((_nanoseconds(info[key]) for key in _TIME_KEYS if info.get(key) is not None), None)
    tags = [f"{key}={info[key]}" for key in _TAG_KEYS if info.get(key) not in (None, "")]
    return FileVersion(info.get("size"), mtime, " ".join(tags) or None)


def _from_file_info(info: pafs.FileInfo) -> FileVersion:
    if info.type == pafs.FileType.NotFound:
        return GONE
    try:
        mtime = info.mtime_ns
    except (TypeError, ValueError):  # a filesystem that keeps no modification times
        mtime = None
    return FileVersion(info.size, mtime)


def _nanoseconds(value: Any) -> int | None:
    """A time as fsspec filesystems give it (seconds, a datetime, an ISO text) in ns since the epoch."""
    try:
        if isinstance(value, str):
            value = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
        if isinstance(value, datetime.datetime):
            if value.tzinfo is None:
                value = value.replace(tzinfo=datetime.timezone.utc)
            epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
            microseconds: int = (value - epoch) // datetime.timedelta(microseconds=1)
            return microseconds * 1000
        return round(float(value) * 1e9)
    except (TypeError, ValueError, OverflowError):
        return None
