"""Waiting, with a bound, for a worker or probe process to exit, and killing it if it does not.

``Process.join(timeout)`` waits on the process's sentinel, a pipe whose write end only the
child holds, and then reaps it with a *blocking* ``waitpid``. A child that closed its
descriptors (a library that daemonizes, ``os.closerange``) makes the sentinel readable while it
still runs, and ``join(timeout)`` then blocks until it exits, without bound. A pidfd becomes
readable only once the process has exited; the sentinel is the fallback where there is none.
Under forkserver the exit code comes through the sentinel, from the forkserver, a moment after
the exit: it is waited for too, within the same bound.

Every wait on one descriptor here and in the pool uses :func:`ready_within` (``poll``), never
``select()``, which raises ValueError for a descriptor numbered past 1023 (FD_SETSIZE), as in a
process with many files open.
"""

from __future__ import annotations

import math
import os
import select
import time
from multiprocessing.connection import wait
from typing import Any

# After SIGKILL a process is gone within milliseconds, unless it sleeps in the kernel (a hung
# NFS read, say): then it is left to a later reap rather than waited for without bound.
KILL_WAIT = 1.0
_POLL_MAX_MS = 2**31 - 1  # poll()'s limit (a C int): a pidfd wait that long goes on on the sentinel


def wait_for_exit(process: Any, seconds: float) -> int | None:
    """``process``'s exit code once it has exited (it is reaped), waiting at most ``seconds``;
    None if it still runs."""
    if process.exitcode is not None:
        return process.exitcode
    deadline = time.monotonic() + seconds
    try:
        fd = os.pidfd_open(process.pid)
    except (AttributeError, OSError):  # no pidfd (Linux < 5.3, macOS, a seccomp filter), or reaped
        pass
    else:
        try:
            ready_within(fd, select.POLLIN, seconds)
        finally:
            os.close(fd)
        if process.exitcode is not None:
            return process.exitcode
    wait([process.sentinel], max(0.0, deadline - time.monotonic()))
    return process.exitcode


def ready_within(fd: int, events: int, seconds: float) -> bool:
    """Whether ``fd`` is ready for ``events`` (``select.POLLIN``, ``POLLOUT``) within ``seconds``."""
    watch = select.poll()
    watch.register(fd, events)
    return bool(watch.poll(min(math.ceil(max(0.0, seconds) * 1000), _POLL_MAX_MS)))


def end_process(process: Any, grace: float) -> tuple[int | None, bool]:
    """Wait up to ``grace`` seconds for ``process`` to exit, kill it if it is still there, and
    reap it: its exit code (None if even SIGKILL has not ended it yet), and whether it was
    killed here."""
    exitcode = wait_for_exit(process, grace)
    if exitcode is not None:
        return exitcode, False
    process.kill()  # multiprocessing ignores a process that exited since
    return wait_for_exit(process, KILL_WAIT), True
