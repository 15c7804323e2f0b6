"""One shared-memory segment.

Segments are anonymous memory files (``memfd_create``): they have no name in
/dev/shm, the kernel frees them when the last mapping and descriptor are gone,
and so nothing can leak whichever process dies and however. They are not
limited by the size of /dev/shm (Docker's 64 MB default), only by memory.
Where memfd is missing, a file in /dev/shm is created and unlinked at once.
The transport maps segments with :func:`~dataloader._transport.mapping.map_shared`,
which holds no descriptor: only the worker keeps one, and not for long.
Pages are reserved with ``posix_fallocate`` before anything is written to
them, so a lack of memory is a clear error here, never a SIGBUS in the middle
of an epoch. Only the bytes a batch needs are reserved; the headroom of a
segment is reserved when a bigger batch first uses it (:func:`reserve`).
"""

from __future__ import annotations

import errno
import mmap
import os
import tempfile

from ..errors import SharedMemoryError
from ..memory import memory_room

ALIGNMENT = 64


def align(offset: int) -> int:
    """``offset`` rounded up to a multiple of :data:`ALIGNMENT`."""
    return (offset + ALIGNMENT - 1) & ~(ALIGNMENT - 1)


def create_fd(size: int, name: str, reserved: int | None = None) -> int:
    """A new shared-memory file of ``size`` bytes, its first ``reserved`` bytes (all by
    default) backed by memory; returns its descriptor.

    A size beyond the memory available is refused before anything is
    reserved: reserving it would wake the OOM killer, not fail.
    """
    room = memory_room()
    if size > room.available:
        raise SharedMemoryError(
            f"a shared segment of {size / 2**20:,.1f} MiB does not fit in the "
            f"{room.available / 2**20:,.1f} MiB of memory available ({room.source}). "
            "Use smaller batches, or free memory."
        )
    fd = _anonymous_fd(name)
    try:
        os.ftruncate(fd, size)
        reserve(fd, 0, size if reserved is None else min(reserved, size))
    except BaseException:
        os.close(fd)
        raise
    return fd


def map_fd(fd: int, size: int) -> mmap.mmap:
    """Map ``size`` bytes of the shared file ``fd`` read-write, as a ``mmap.mmap``.

    Before Python 3.13 the ``mmap`` keeps a duplicate of ``fd`` until it is closed: the
    transport maps with :func:`~dataloader._transport.mapping.map_shared` instead, which keeps
    none. This one is for probes and benchmarks that want ``mmap``'s ``close()``.
    """
    return mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)


def _anonymous_fd(name: str) -> int:
    memfd_create = getattr(os, "memfd_create", None)
    if memfd_create is not None:
        try:
            return memfd_create(name, os.MFD_CLOEXEC)
        except OSError as error:
            if error.errno in (errno.EMFILE, errno.ENFILE):
                raise  # out of descriptors: a file would need one too
            # Else memfd is refused here (an old kernel, a sandbox): fall back to a file.
    directory = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
    fd, path = tempfile.mkstemp(prefix=name + "-", dir=directory)
    os.unlink(path)
    return fd


def reserve(fd: int, start: int, length: int) -> None:
    """Back bytes ``start:start + length`` of the shared file ``fd`` with memory now, or raise
    :class:`SharedMemoryError` saying why (writing to them later could not fail then)."""
    fallocate = getattr(os, "posix_fallocate", None)
    if fallocate is None or length <= 0:
        return
    try:
        fallocate(fd, start, length)
    except OSError as error:
        if error.errno in (errno.ENOSPC, errno.ENOMEM):
            raise SharedMemoryError(
                f"cannot reserve {length / 2**20:.1f} MiB of shared memory for a batch: "
                f"{os.strerror(error.errno)}. The machine or container is out of memory; lower "
                "shm_budget, the batch size, prefetch_factor or num_workers."
            ) from error
        if error.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
            raise
