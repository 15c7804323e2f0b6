"""Starting a loader's workers: their boot records, the shared-memory budget, the memory checks."""

from __future__ import annotations

import itertools
import os
from contextlib import contextmanager
from typing import Iterator

from .._stages.source import Source
from .._workers.descriptors import check_room, descriptors_for
from .._workers.loop import WorkerBoot
from .._workers.pool import WorkerPool
from .._workers.threads import ThreadWorkerPool
from ..memory import MemoryRoom, check_shm, check_worker_memory, memory_room
from .spec import PipelineSpec

# Without a budget each worker may keep this much shared memory (a cap, not a
# reservation: segments are made only as batches need them), at most a
# quarter of the memory available split between the workers.
_DEFAULT_WORKER_BUDGET = 512 * 2**20
_MIN_WORKER_BUDGET = 16 * 2**20

_pool_ids = itertools.count()


def start_pool(
    spec: PipelineSpec, source: Source, count: int, most: int | None = None, seed: int | None = None
) -> WorkerPool | ThreadWorkerPool:
    """Start ``count`` workers (after checking that the open-files limit has room for them and,
    for processes, the memory room). ``most``: the most the pool may grow to (the autotuner's
    bound), which the memory budget is split by. ``seed``: the workers' base seed, where it is
    not the loader's (``seeding="worker"`` gives each epoch's workers their own)."""
    options = spec.options
    threads = options.worker_type == "thread"  # no shared memory: no budget, no room to check
    room = None if threads else memory_room()
    most = max(count, most or count)
    per_worker = 0 if threads else _per_worker_budget(options.shm_budget, most, room)
    name = f"dataloader-{os.getpid()}-{next(_pool_ids)}"
    boots = [
        WorkerBoot(
            worker_id=worker_id,
            num_workers=count,
            seed=spec.base_seed if seed is None else seed,
            dataset=spec.dataset,
            transform=spec.transform,
            collator=spec.collator,
            worker_init_fn=options.worker_init_fn,
            shm_budget=per_worker,
            name=f"{name}-w{worker_id}",
            stream_batch_size=source.worker_batch_size,
            close_fds=(),
            restart_stream=source.worker_restart,
            policy=spec.error_policy(),
            hooks=options.hooks,
            watch_global_draws=threads and options.seed is not None and options.seeding == "batch",
            seed_per_batch=options.seeding == "batch",
        )
        for worker_id in range(count)
    ]
    context = None if threads else options.context()
    method = "thread" if context is None else context.get_start_method()
    check_room(count, method)  # before any worker starts: none is left to stop
    if context is None:
        with descriptors_for(count, method):
            return ThreadWorkerPool(boots)
    check_worker_memory(count, None, per_worker * count, room=room)
    if not hasattr(os, "memfd_create"):  # segments then live in /dev/shm
        check_shm(per_worker * most)
    with descriptors_for(count, method):
        return WorkerPool(boots, context)


@contextmanager
def built_on(pool: WorkerPool | ThreadWorkerPool, owned: bool) -> Iterator[None]:
    """Around what an epoch builds on ``pool`` (its executor, whose wake-up pipe is the last
    descriptor of its start): on failure an ``owned`` pool is shut down, and a lack of
    descriptors is told as the pool's start would have told it."""
    context = getattr(pool, "context", None)
    method = "thread" if context is None else context.get_start_method()
    try:
        with descriptors_for(len(pool.workers), method):
            yield
    except BaseException:
        if owned:
            pool.shutdown()
        raise


def _per_worker_budget(total: int | None, count: int, room: MemoryRoom) -> int:
    if total is not None:
        return max(1, total // count)
    share = room.available // (4 * count)
    return max(_MIN_WORKER_BUDGET, min(_DEFAULT_WORKER_BUDGET, share))
