"""Descriptors: a held batch costs none in any process, and running out is never a crash.

Python's ``mmap.mmap`` keeps a duplicate of the descriptor it maps, so every
segment used to cost one in the main process and two in its worker: a loop
holding about 1,000 batches reached ``ulimit -n`` (``Too many open files`` in
a worker, or ``received 0 items of ancdata`` in the main process).
"""

from __future__ import annotations

import errno
import os

import numpy as np
import pytest

from dataloader import DataLoader, SequentialSampler
from dataloader._transport import mapping
from dataloader._transport.arena import OPEN_DESCRIPTORS, BumpAllocator
from dataloader._transport.codec import SharedBatch, pack, split
from dataloader._transport.mapping import map_shared
from dataloader._transport.receiver import Receiver
from dataloader._transport.segment import create_fd

from ._descriptor_scripts import HELD, LIMIT, Tagged, check_sample, exhaust_descriptors, run
from ._helpers import LocalWorker, send_without_segments

KiB, MiB = 2**10, 2**20


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _mapped(name: str) -> int:
    with open("/proc/self/maps") as maps:
        return sum(f"memfd:{name}" in line for line in maps)


# -- one mapping ------------------------------------------------------------------


@pytest.mark.parametrize("libc", [True, False], ids=["ctypes", "python-mmap"])
def test_a_mapping_outlives_its_descriptor_and_goes_with_its_last_view(no_leaks, monkeypatch, libc):
    if not libc:
        monkeypatch.setattr(mapping, "_libc", lambda: None)
    fd = create_fd(MiB, "descriptor-test")
    first = map_shared(fd, MiB)
    second = map_shared(fd, MiB)
    os.close(fd)
    np.frombuffer(first, np.uint8)[:4] = [1, 2, 3, 4]
    assert np.frombuffer(second, np.uint8)[:4].tolist() == [1, 2, 3, 4], "not the same memory"
    view = np.frombuffer(second, np.uint8)[1:3]
    del first, second
    if libc:  # Python's mmap keeps a descriptor before 3.13 (trackfd=False); ctypes keeps none
        assert _mapped("descriptor-test") == 1, "the mapping of the view still alive went early"
    assert view.tolist() == [2, 3]
    del view
    assert _mapped("descriptor-test") == 0, "the mapping outlived its last view"


def test_the_main_process_keeps_no_descriptor_per_segment(no_leaks):
    receiver = Receiver()
    worker = LocalWorker(512 * MiB, receiver)
    try:
        before = _fds()
        held = []
        for i in range(3 * OPEN_DESCRIPTORS):
            payload = pack(*split(np.full(100 * KiB, i, np.uint8)), worker.pool, None)
            assert isinstance(payload, SharedBatch)
            held.append(receiver.decode(0, payload))
        # What is left open is the worker's (this process plays both): at most OPEN_DESCRIPTORS.
        assert _fds() - before <= OPEN_DESCRIPTORS
        assert [int(batch[0]) for batch in held] == list(range(3 * OPEN_DESCRIPTORS))
    finally:
        worker.close()
        receiver.close()


# -- the worker's descriptors ------------------------------------------------------


@pytest.fixture
def worker(no_leaks):
    local = LocalWorker(512 * MiB)
    yield local
    local.close()


def test_a_worker_keeps_the_descriptors_of_its_last_used_segments_only(worker):
    before = _fds()
    segments = [worker.pool.acquire(100 * KiB) for _ in range(3 * OPEN_DESCRIPTORS)]
    assert len({s.id for s in segments}) == len(segments)
    assert _fds() - before == OPEN_DESCRIPTORS
    kept = [s.fd >= 0 for s in segments]
    assert kept == [False] * 2 * OPEN_DESCRIPTORS + [True] * OPEN_DESCRIPTORS
    old = segments[0]
    assert old.capacity == old.backed == 100 * KiB < old.size, "without a descriptor it cannot grow"
    # A batch the old segment holds reuses it; a bigger one goes elsewhere, never past the backed.
    worker.pool.release([old.id])
    assert worker.pool.acquire(100 * KiB) is old
    worker.pool.release([old.id])
    assert worker.pool.acquire(100 * KiB + 1) is not old
    allocate = BumpAllocator(old)
    inside = allocate((100 * KiB,), np.dtype(np.uint8))
    spill = allocate((1,), np.dtype(np.uint8))
    assert inside.ctypes.data == old.address and spill.flags.owndata, "wrote past what was backed"


def test_a_segment_fully_backed_gives_its_descriptor_up(worker):
    segment = worker.pool.acquire(100 * KiB)
    assert segment.fd >= 0 and segment.backed < segment.size
    segment.back(segment.size)
    assert segment.fd == -1 and segment.capacity == segment.size


def _no_descriptors(*args):
    raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))


def test_a_worker_without_descriptors_sends_batches_inline_and_says_why(
    worker, monkeypatch, caplog
):
    monkeypatch.setattr(os, "memfd_create", _no_descriptors)
    monkeypatch.setattr("tempfile.mkstemp", _no_descriptors)
    warnings = send_without_segments(worker, caplog)
    assert len(warnings) == 1, "warned more than once"
    message = warnings[0]
    assert "no file descriptor left" in message and "ulimit -n" in message


def test_only_running_out_of_descriptors_is_taken_for_it(worker, monkeypatch):
    def broken(*args, **kwargs):
        raise OSError(errno.EIO, "broken")

    monkeypatch.setattr(os, "memfd_create", broken)
    monkeypatch.setattr("tempfile.mkstemp", broken)
    with pytest.raises(OSError, match="broken"):
        worker.pool.acquire(MiB)


def test_a_worker_out_of_descriptors_still_delivers_every_batch(no_leaks, start_method):
    dataset = Tagged(64, count=False)  # counting would take a descriptor too
    loader = DataLoader(
        dataset,
        SequentialSampler(dataset, batch_size=2),
        num_workers=2,
        multiprocessing_context=start_method,
        worker_init_fn=exhaust_descriptors,
    )
    iterator = iter(loader)
    held = [next(iterator) for _ in range(31)]
    assert iterator.stats().shared_memory_bytes == 0, "a segment was made: no limit was reached"
    held += list(iterator)
    assert len(held) == 32
    for number, batch in enumerate(held):
        for row in range(2):
            check_sample(batch[row], 2 * number + row)


# -- whole loaders under a low limit (child scripts) ------------------------------------


@pytest.mark.parametrize("workers", [2, 4])
def test_holding_more_batches_than_descriptors(no_leaks, workers):
    seen, stderr = run("hold-many", workers)
    assert seen["batches"] == HELD > LIMIT
    # The main process: its own few (sockets, pipes, sentinels), none per batch held.
    assert seen["most"] - seen["before"] <= 4 * workers + 8, seen
    # A worker: its pipes, the dataset's, and at most OPEN_DESCRIPTORS segments.
    assert seen["worker_most"] <= OPEN_DESCRIPTORS + 32, seen
    assert "Traceback" not in stderr, stderr


def test_a_main_process_out_of_descriptors_gets_a_clear_error(no_leaks):
    seen, _ = run("main-runs-out", 2)
    assert seen["error"] == "SharedMemoryError", seen
    assert "DataLoaderError" in seen["mro"]
    assert "no file descriptor free to receive a shared-memory segment" in seen["message"]
    assert "ulimit -n" in seen["message"] and "RLIMIT_NOFILE" in seen["message"]
