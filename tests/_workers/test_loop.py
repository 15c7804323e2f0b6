"""The worker loop run in this process, driven message by message from the main process's end."""

from __future__ import annotations

import os
from multiprocessing import Pipe

import numpy as np
import pytest

from dataloader import Collator
from dataloader._local import set_worker_info
from dataloader._stages.seeding import seeded_then_restored
from dataloader._stages.task import BatchTask
from dataloader._workers.fd_passing import receive_descriptor
from dataloader._workers.loop import WorkerBoot, WorkerLoop
from dataloader._workers.messages import (
    BatchDone,
    ReleaseSegments,
    RunTask,
    SegmentCreated,
    Shutdown,
    Started,
)
from dataloader.transform import PseudoTransform

MiB = 1 << 20


class Images:
    """Sample ``i``: a 256 KiB uint8 image filled with ``i % 256`` (batches go through segments)."""

    def __getitem__(self, index: int) -> np.ndarray:
        return np.full((256, 1024), index % 256, np.uint8)

    def __len__(self) -> int:
        return 64


class FreshArrays(Collator):
    """A custom collator that returns a fresh array (not from the batch allocator)."""

    def apply(self, samples):
        return np.stack(samples)


@pytest.fixture(params=[Collator, FreshArrays], ids=["collated-in-place", "custom-collator"])
def worker(request):
    main, there = Pipe()
    boot = WorkerBoot(
        worker_id=0, num_workers=1, seed=0, dataset=Images(), transform=PseudoTransform(),
        collator=request.param(), worker_init_fn=None, shm_budget=64 * MiB, name="loop-test",
        stream_batch_size=None, close_fds=(),
    )
    # The worker seeds the global random streams and sets the worker info of this thread:
    # both go back to what they were, so later tests see a plain main process.
    with seeded_then_restored(0):
        local = WorkerLoop(boot, there)
        local.start()
        assert isinstance(main.recv(), Started)
        try:
            yield local, main
        finally:
            set_worker_info(None)
            local.pool.close()
            main.close()
            there.close()


def _replies(main) -> tuple[list[int], list[BatchDone]]:
    """The segments announced (their descriptors received and closed) and the batches sent."""
    created, done = [], []
    while main.poll():
        message = main.recv()
        if isinstance(message, SegmentCreated):
            os.close(receive_descriptor(main, "worker 0"))
            created.append(message.segment_id)
        elif isinstance(message, BatchDone):
            done.append(message)
    return created, done


def test_a_release_queued_behind_the_next_task_is_seen_before_a_segment_is_taken(worker):
    local, main = worker
    for index in range(2):  # two batches lent: segments 0 and 1
        local._run(BatchTask(0, index, indices=[4 * index + k for k in range(4)]))
    created, done = _replies(main)
    assert created == [0, 1] and [d.payload.segment_id for d in done] == [0, 1]
    # The next task arrives first, then the news that the user dropped batch 0.
    main.send(RunTask(BatchTask(0, 2, indices=[8, 9, 10, 11])))
    main.send(ReleaseSegments((0,)))
    main.send(Shutdown())
    local.serve()
    created, done = _replies(main)
    assert created == [], "a third segment was made although segment 0 had been released"
    assert [d.payload.segment_id for d in done] == [0]
    assert local.pool.reserved == 2 * local.pool._segments[0].size


def test_tasks_read_early_keep_their_order(worker):
    local, main = worker
    local._run(BatchTask(0, 0, indices=[0, 1, 2, 3]))  # the first batch sizes the segments
    _replies(main)
    for index in (1, 2, 3):
        main.send(RunTask(BatchTask(0, index, indices=[4 * index + k for k in range(4)]), released=()))
    main.send(Shutdown())
    local.serve()
    _, done = _replies(main)
    assert [d.index for d in done] == [1, 2, 3]
