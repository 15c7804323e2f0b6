"""Bounded waits for a process's exit (dataloader/_workers/exits.py)."""

from __future__ import annotations

import multiprocessing
import os
import resource

import numpy as np
import pytest

from dataloader import DataLoader, LoaderTimeoutError, SequentialSampler
from dataloader._workers.exits import end_process, wait_for_exit

_PAST_FD_SETSIZE = 1100  # select() refuses descriptors from 1024 on


def _block_on(fd: int) -> None:
    os.read(fd, 1)  # until the test writes, or kills this process


@pytest.fixture
def low_descriptors_taken():
    """Every descriptor number below ``_PAST_FD_SETSIZE`` in use, as in a process with many
    files open: the next descriptor opened (a pidfd, say) is numbered past select()'s limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < _PAST_FD_SETSIZE + 64:
        pytest.skip(f"ulimit -n is at most {hard}")
    if soft != resource.RLIM_INFINITY and soft < _PAST_FD_SETSIZE + 64:
        resource.setrlimit(resource.RLIMIT_NOFILE, (_PAST_FD_SETSIZE + 64, hard))
    taken = []
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        taken.append(null)
        while taken[-1] < _PAST_FD_SETSIZE:
            taken.append(os.dup(null))
        yield
    finally:
        for fd in taken:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_process_past_fd_setsize_is_waited_for_and_killed(no_leaks, low_descriptors_taken):
    """Before: select() on the pidfd raised ValueError (filedescriptor out of range), raw, from
    a worker's death report and from the pool's shutdown (which then left its workers)."""
    context = multiprocessing.get_context("fork")
    read, write = os.pipe()
    try:
        process = context.Process(target=_block_on, args=(read,), daemon=True)
        process.start()
        assert wait_for_exit(process, 0.0) is None  # still blocked on the pipe
        exitcode, killed = end_process(process, 0.0)
        assert (exitcode, killed) == (-9, True)
        process.close()
        process = context.Process(target=_block_on, args=(read,), daemon=True)
        process.start()
        os.write(write, b"\0")
        assert end_process(process, 60.0) == (0, False)
        process.close()
    finally:
        os.close(read)
        os.close(write)


class _StuckAt1:
    """0..3; sample 1 blocks its worker on a pipe nothing writes to (until the worker is killed)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __len__(self) -> int:
        return 4

    def __getitem__(self, index: int):
        if index == 1:
            os.read(self.fd, 1)
        return np.int64(index)


def test_a_timeout_past_fd_setsize_reports_the_stack_and_close_stops_the_worker(no_leaks, low_descriptors_taken):
    """Before: the timeout report's wait for the worker's stack raised ValueError from select(),
    raw, instead of the LoaderTimeoutError."""
    read, write = os.pipe()
    try:
        dataset = _StuckAt1(read)
        loader = DataLoader(dataset, SequentialSampler(dataset, batch_size=1), num_workers=1, timeout=0.5,
                            multiprocessing_context="fork")
        batches = iter(loader)
        assert int(next(batches)[0]) == 0
        with pytest.raises(LoaderTimeoutError, match="its stack:\n") as caught:
            next(batches)
        assert "__getitem__" in str(caught.value)
        loader.close()
    finally:
        os.close(read)
        os.close(write)
