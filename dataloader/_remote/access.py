"""How a reader reaches its files: the retries, the read-ahead budget and the local cache, from
the reader's ``retries=``, ``read_ahead=``, ``cache_dir=`` and ``cache_limit=`` arguments."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import pyarrow.fs as pafs

from .._validate import check_non_negative_int, check_positive_int
from ..errors import ArgumentTypeError, ArgumentValueError
from .cache import ShardCache
from .filesystems import is_remote
from .retry import RetryPolicy
from .retrying_fs import retrying

# Bytes read ahead by default on a remote filesystem (local disks need none: the page cache reads ahead).
READ_AHEAD = 64 * 2**20
RETRIES = 5


@dataclass(frozen=True)
class Access:
    """What a reader was told about reaching its files (see the module)."""

    retry: RetryPolicy = RetryPolicy()
    read_ahead: int | None = None  # bytes; None: READ_AHEAD on a remote filesystem, 0 on a local one
    cache: ShardCache | None = None

    def budget(self, filesystem: pafs.FileSystem) -> int:
        """Bytes to read ahead on ``filesystem``."""
        if self.read_ahead is not None:
            return self.read_ahead
        return READ_AHEAD if is_remote(filesystem) else 0

    def reach(self, filesystem: pafs.FileSystem) -> pafs.FileSystem:
        """``filesystem`` as the reader should use it: behind retries when it is remote (with
        ``retries=0`` too, for the wrapper's care of forked processes)."""
        return retrying(filesystem, self.retry) if is_remote(filesystem) else filesystem

    def cache_for(self, filesystem: pafs.FileSystem) -> ShardCache | None:
        """The cache to read ``filesystem``'s files through (None for local files: they are local)."""
        return self.cache if is_remote(filesystem) else None


def access_from(retries: Any = RETRIES, read_ahead: Any = None, cache_dir: Any = None, cache_limit: Any = None) -> Access:
    """:class:`Access` from a reader's arguments, checked."""
    retries = check_non_negative_int("retries", retries, "0 turns retrying off")
    if read_ahead is not None:
        read_ahead = check_non_negative_int("read_ahead", read_ahead, "bytes to read ahead; 0 turns it off")
    if cache_limit is not None:
        cache_limit = check_positive_int("cache_limit", cache_limit, "bytes the cache may hold; None: no bound")
        if cache_dir is None:
            raise ArgumentTypeError("`cache_limit` bounds the cache in `cache_dir`; pass cache_dir= too.")
    cache = None
    if cache_dir is not None:
        if not isinstance(cache_dir, (str, os.PathLike)):
            raise ArgumentTypeError(f"`cache_dir` must be a path or None; got {type(cache_dir).__name__}.")
        if not os.fspath(cache_dir):
            raise ArgumentValueError(
                '`cache_dir` is an empty string, which would put the copies in the working directory; give '
                'a folder ("." for the working directory on purpose), or None for no cache.'
            )
        cache = ShardCache(cache_dir, cache_limit)
    return Access(RetryPolicy(retries=retries), read_ahead, cache)
