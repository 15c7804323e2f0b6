"""A worker process's heap: freed memory kept for the next batch instead of handed back to the OS.

glibc's malloc gives memory at the top of its heap back to the kernel once more than
``M_TRIM_THRESHOLD`` (128 KiB) is free there, and serves blocks of ``M_MMAP_THRESHOLD`` (128 KiB,
raised as it goes) or more with a fresh ``mmap`` each time. A worker allocates and frees the same
few megabytes every batch (decoded images, their crops, the samples of one batch), so by default
each batch faults every one of those pages in again: measured on 256-pixel JPEGs with
``RandomResizedCrop(224)``, 2700 page faults a batch of 32, a quarter of the workers' CPU time,
most of it in the kernel. Raising both thresholds keeps that memory mapped for the next batch;
what a worker holds stays what its largest batch needed. Only worker processes do this (their
heaps are the loader's own), never the user's process; a ``MALLOC_*_`` environment variable the
user set means they chose for themselves, and other C libraries have no ``mallopt``.
"""

from __future__ import annotations

import ctypes
import os

# mallopt's parameter numbers (glibc's malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# Blocks under this come from the heap, which keeps them (glibc's most, 32 MiB on 64-bit: a
# 1280x960 image is 3.7 MiB); free memory at the top of the heap up to this much stays mapped.
MMAP_THRESHOLD = 32 * 2**20
TRIM_THRESHOLD = 64 * 2**20
_USER_SETTINGS = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_", "GLIBC_TUNABLES")


def keep_freed_memory() -> bool:
    """Raise this process's malloc thresholds (see the module docstring); whether it did."""
    if any(name in os.environ for name in _USER_SETTINGS):
        return False
    try:  # the process's own symbols, libc's among them (find_library would run ldconfig)
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # no mallopt (macOS): nothing to set
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
