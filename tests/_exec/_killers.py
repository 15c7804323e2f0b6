"""Datasets for the recovery tests: samples that kill the worker process reading them.

Module level, so that spawn and forkserver workers (and probes) can unpickle them.
"""

from __future__ import annotations

import ctypes
import faulthandler
import fcntl
import os
import select
import signal
import stat
import threading

import numpy as np

from dataloader import Dataset, get_worker_info


class Killers(Dataset):
    """0..n-1; reading a sample of ``kills`` in a worker ends that process (``how``: a real
    segmentation fault or an abort, as a broken decoder does; "SIGKILL", as the OOM killer
    does; "exit", ``os._exit(3)``; "hang up" and "close fds", a slow death: see
    :func:`_die_slowly`). In the main process it raises instead, so that a serial run shows the
    batches a killed sample must give."""

    def __init__(self, n: int, kills: dict[int, str]) -> None:
        self.n, self.kills = n, kills

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> np.ndarray:
        how = self.kills.get(index)
        if how is not None:
            if get_worker_info() is None:
                raise OSError(f"sample {index} is corrupt")
            faulthandler.disable()  # the crash is the point: no fatal-error dump in the log
            if how == "SIGSEGV":
                ctypes.string_at(0)
            if how == "SIGKILL":
                os.kill(os.getpid(), signal.SIGKILL)
            if how == "exit":
                os._exit(3)
            if how in ("hang up", "close fds"):
                _die_slowly(sockets_only=how == "hang up")
            os.abort()
        return np.array([index, index * index])


class KillInTransform:
    """A per-sample transform that aborts its process on the samples of ``kills``."""

    def __init__(self, kills: set[int]) -> None:
        self.kills = kills

    def apply(self, sample: np.ndarray) -> np.ndarray:
        if int(sample[0]) in self.kills:
            if get_worker_info() is None:
                raise ValueError(f"sample {int(sample[0])} cannot be transformed")
            faulthandler.disable()
            os.abort()
        return sample + 1


def _die_slowly(sockets_only: bool) -> None:
    """Close this process's end of its channel to the main process ("hang up": its sockets;
    "close fds": every descriptor but stdio and pipes' read ends, so its exit sentinel and a
    probe's pipe too), then block until killed: the main process sees EOF while the process is
    still there, as when a dying worker is stuck in an atexit handler or a C destructor, for as
    long as the main process lets it. Blocking on a pipe of its own, not on a timer, keeps the
    test free of any "slower than X" assumption. The "parent alive" pipe (a read end) stays
    open: its watchdog thread, maybe not reading it yet, must not exit on EBADF, and still ends
    this process if the test process dies."""
    for fd in map(int, os.listdir("/proc/self/fd")):
        if fd < 3:
            continue
        try:
            mode = os.fstat(fd).st_mode
            reads_a_pipe = stat.S_ISFIFO(mode) and fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY
            if stat.S_ISSOCK(mode) or not (sockets_only or reads_a_pipe):
                os.close(fd)
        except OSError:  # the listing's own descriptor, closed since
            pass
    never, keep = os.pipe()  # this process holds the only writer: nothing ever arrives
    while True:
        select.select([never], [], [])


class HangsUpInThread(Dataset):
    """0..n-1; reading ``index`` in a thread worker closes the worker's channel to the main
    thread (its writing end), then blocks until ``release`` is set: the thread-worker shape of
    a worker whose channel closes long before it is gone."""

    def __init__(self, n: int, index: int, release: threading.Event) -> None:
        self.n, self.index, self.release = n, index, release

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> np.ndarray:
        if index == self.index and get_worker_info() is not None:
            # The thread runs _run_thread_worker(boot, End(to_main, to_worker), shared): the
            # test reaches into it, as no public way closes a thread worker's channel.
            to_main = threading.current_thread()._args[1]._out  # type: ignore[attr-defined]
            to_main._write.close()
            self.release.wait()
        return np.array([index, index * index])
