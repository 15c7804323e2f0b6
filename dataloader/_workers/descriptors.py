"""File descriptors a pool needs in the main process, and the error when the limit is too low.

A pool makes its pipes while its workers start. Under ``ulimit -n 16`` the second worker's
``os.pipe`` failed deep inside multiprocessing with a bare ``OSError: [Errno 24] Too many open
files``, and could leave the pipe ends it had made open. :func:`check_room` counts first (what
each worker holds, and the pool's own pipes, as measured) and refuses a pool that cannot fit
with a :class:`~dataloader.errors.ResourceLimitError` naming the limit, the need and the fix;
:func:`out_of_descriptors` turns a shortage met anyway (another thread opened files meanwhile)
into the same error.
"""

from __future__ import annotations

import errno
import os
import resource
from contextlib import contextmanager
from typing import Iterator

from ..errors import ResourceLimitError
from ..memory import DESCRIPTORS_PER_WORKER

NO_DESCRIPTOR = (errno.EMFILE, errno.ENFILE)

# Descriptors the pool needs besides its workers' own (memory.DESCRIPTORS_PER_WORKER) while it
# starts, measured with ``ulimit -n`` set just high enough: the receiver's wake-up pipe, the "parent
# alive" pipe and multiprocessing's two pipes while the last worker starts (the epoch's wake-up
# pipe comes once those are closed); under spawn and forkserver the resource tracker's pipe and
# the server's connection; a thread pool's two wake-up pipes.
_FOR_POOL = {"fork": 8, "spawn": 11, "forkserver": 12, "thread": 4}
# Opened at once while a worker process starts: its connection's and stack pipe's four ends,
# multiprocessing's two pipes, and under spawn the resource tracker's pipe (the first time),
# under forkserver the connection to the server (and the server's own pipes, the first time).
# One of those failing can leak the others' ends (multiprocessing does not close them), so
# :func:`ensure_free` checks first.
START_PEAK = {"fork": 8, "spawn": 10, "forkserver": 9}


def soft_limit() -> int | None:
    """The open-files limit (``ulimit -n``), or None where there is none."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return None if soft == resource.RLIM_INFINITY or soft < 0 else soft


def open_descriptors() -> int | None:
    """How many descriptors below the open-files limit this process has open (a new one must be
    numbered below it; one inherited above it takes no room), or None where that cannot be read."""
    soft = soft_limit()
    for folder in ("/proc/self/fd", "/dev/fd"):
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        taken = sum(1 for name in names if name.isdigit() and (soft is None or int(name) < soft))
        return taken - 1  # less the one listdir itself opened
    return None


def ensure_free(count: int) -> None:
    """Raise ``OSError(EMFILE)`` unless ``count`` more descriptors can be opened now."""
    soft, in_use = soft_limit(), open_descriptors()
    if soft is not None and in_use is not None and in_use + count > soft:
        raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))


def needed(count: int, start_method: str) -> int:
    """Descriptors a pool of ``count`` workers (``start_method``: "thread" for threads) needs."""
    kind = "thread" if start_method == "thread" else "process"
    return count * DESCRIPTORS_PER_WORKER[kind] + _FOR_POOL.get(start_method, max(_FOR_POOL.values()))


def check_room(count: int, start_method: str) -> None:
    """Raise :class:`ResourceLimitError` unless the open-files limit leaves room for the pool."""
    soft, in_use = soft_limit(), open_descriptors()
    if soft is not None and in_use is not None and in_use + needed(count, start_method) > soft:
        raise out_of_descriptors(count, start_method)


@contextmanager
def descriptors_for(count: int, start_method: str) -> Iterator[None]:
    """Turn running out of descriptors inside the block (starting ``count`` workers) into a
    :class:`ResourceLimitError`; the block cleans up after itself."""
    try:
        yield
    except OSError as error:
        if error.errno not in NO_DESCRIPTOR:
            raise
        raise out_of_descriptors(count, start_method) from error


def out_of_descriptors(count: int, start_method: str) -> ResourceLimitError:
    """The error for a pool of ``count`` workers that does not fit under ``ulimit -n``."""
    kind = "thread" if start_method == "thread" else "process"
    soft, hard = soft_limit(), resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    in_use = open_descriptors()
    need = needed(count, start_method)
    fix = max(4096, 2 * (need + (in_use or 0)))
    if hard != resource.RLIM_INFINITY and hard >= 0:
        fix = min(fix, hard)
    return ResourceLimitError(
        f"starting {count} {kind} worker(s) needs about {need} more file descriptors "
        f"({DESCRIPTORS_PER_WORKER[kind]} per worker, {need - count * DESCRIPTORS_PER_WORKER[kind]} for the pool), and "
        f"{'some' if in_use is None else in_use} of the {soft or 'unlimited'} that the open-files limit "
        f"allows (ulimit -n, RLIMIT_NOFILE) are open already. Raise the limit (ulimit -n {fix} "
        f"in the shell that starts the program, or resource.setrlimit(resource.RLIMIT_NOFILE, "
        f"({fix}, hard)) before the loader starts), or use fewer workers."
    )
