"""Shared mappings that hold no file descriptor.

Python's ``mmap.mmap`` keeps a duplicate of the descriptor it maps for as long
as the mapping lives (until Python 3.13's ``trackfd=False``). Every segment
then cost a descriptor in each process that mapped it, and a training loop that
holds a thousand batches reached ``ulimit -n`` (often 1,024): ``Too many open
files`` in a worker, or a descriptor lost on its way to the main process. A
mapping needs no descriptor once it is made, so this one is made with
``mmap(2)`` through ctypes and unmapped with ``munmap(2)`` when the last view of
it is gone: :func:`map_shared` returns a ``memoryview``; arrays made from it
keep it alive, and it keeps the mapping.
"""

from __future__ import annotations

import ctypes
import functools
import mmap
import os
import resource
import sys
from typing import Any

import numpy as np

from ..errors import ResourceLimitError

_PROT = mmap.PROT_READ | mmap.PROT_WRITE
_MAP_FAILED = ctypes.c_void_p(-1).value


class _Mapping:
    """Owns ``size`` bytes mapped at ``address``; unmaps them when it is collected.

    NumPy reads it through ``__array_interface__``, so the array made from it
    keeps it alive (as its ``base``) for as long as any view of that array lives.
    """

    def __init__(self, address: int, size: int, munmap: Any) -> None:
        self.address, self.size, self._munmap = address, size, munmap
        self.__array_interface__ = {
            "data": (address, False), "shape": (size,), "typestr": "|u1", "version": 3,
        }

    def __del__(self) -> None:
        self._munmap(self.address, self.size)


@functools.cache
def _libc() -> Any:
    """libc's ``mmap`` and ``munmap``, or None where ctypes cannot reach them."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        mmap_, munmap = libc.mmap, libc.munmap
    except (OSError, AttributeError):
        return None
    mmap_.restype = ctypes.c_void_p
    # void *mmap(void *addr, size_t length, int prot, int flags, int fd, off_t offset)
    int_ = ctypes.c_int
    mmap_.argtypes = (ctypes.c_void_p, ctypes.c_size_t, int_, int_, int_, ctypes.c_ssize_t)
    munmap.restype = ctypes.c_int
    munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
    return mmap_, munmap


def map_shared(fd: int, size: int) -> memoryview:
    """``size`` bytes of the shared file ``fd``, mapped read-write; ``fd`` may be closed at once.

    The mapping lasts as long as the returned view or any array made from it.
    """
    libc = _libc()
    if libc is None:  # no ctypes: Python's mmap, which keeps a descriptor before 3.13
        extra = {"trackfd": False} if sys.version_info >= (3, 13) else {}
        return memoryview(mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=_PROT, **extra))
    mmap_, munmap = libc
    address = mmap_(None, size, _PROT, mmap.MAP_SHARED, fd, 0)
    if address is None or address == _MAP_FAILED:
        error = ctypes.get_errno()
        raise OSError(error, f"cannot map a shared segment of {size} bytes: {os.strerror(error)}")
    return memoryview(np.asarray(_Mapping(address, size, munmap)))


def address_limit() -> str:
    """This process's address-space limit (``RLIMIT_AS``, ``ulimit -v``) in words."""
    soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    return "unlimited" if soft == resource.RLIM_INFINITY else f"{soft / 2**20:,.0f} MiB"


def unsendable(nbytes: int) -> ResourceLimitError | None:
    """The error for a batch of ``nbytes`` that found no memory to be made or copied into a
    message in (the fall-back where its segment could not be mapped): under an address-space
    limit, one naming it and the fix; None without one (memory is full: MemoryError says so)."""
    if resource.getrlimit(resource.RLIMIT_AS)[0] == resource.RLIM_INFINITY:
        return None
    return ResourceLimitError(
        f"no room for a batch of {nbytes / 2**20:,.1f} MiB, in a shared-memory segment or in "
        f"private memory to send it through the pipe: this process has no address space left "
        f"under its limit (RLIMIT_AS, ulimit -v) of {address_limit()}. Raise the limit (ulimit "
        "-v unlimited in the shell that starts the program, or resource.setrlimit("
        "resource.RLIMIT_AS, ...) before the loader starts), or use smaller batches."
    )
