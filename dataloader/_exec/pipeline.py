"""Assembles one epoch: source -> executor -> consumer stages.

```
serial:    tasks -> SerialExecutor ------------------------------\\
parallel:  tasks -> ParallelExecutor(process or thread pool) -----+-> [Preload | convert] -> [batch transforms] -> LoaderIterator
```
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field
from typing import Any, Iterator

from .._device.adapters import Adapter
from .._device.preload import Preload
from .._options import LoaderOptions
from .._stages.batch import BatchMaker
from .._stages.consumer import Stage, apply_batch_transform
from .._stages.source import TimedStream, map_tasks, stream_tasks
from .._stages.task import BatchTask
from .._workers.loop import WorkerBoot
from .._workers.pool import WorkerPool
from .._workers.threads import ThreadWorkerPool
from ..memory import check_shm, check_worker_memory, memory_room
from ..monitor import MonitorSettings, Recorder
from .iterator import LoaderIterator
from .parallel import ParallelExecutor
from .serial import SerialExecutor


@dataclass(frozen=True)
class PipelineSpec:
    """The building blocks and options of one loader, as the executors see them."""

    dataset: Any
    sampler: Any
    transform: Any
    collator: Any
    options: LoaderOptions
    is_stream: bool
    # The seed batches are derived from: the user's, or one drawn per loader,
    # so unseeded workers still never repeat each other's augmentations.
    base_seed: int
    adapter: Adapter
    batch_transforms: list = field(default_factory=list)


def open_epoch(spec: PipelineSpec, epoch: int, persistent_pool: Any = None) -> LoaderIterator:
    """The iterator of one epoch; ``persistent_pool`` is reused (not stopped) when given."""
    options = spec.options
    recorder = Recorder(options.num_workers, MonitorSettings.from_env(), options.worker_type)
    if options.num_workers == 0:
        executor = _serial_executor(spec, epoch, recorder)
    else:
        pool = persistent_pool if persistent_pool is not None else start_pool(spec)
        executor = _parallel_executor(spec, epoch, pool, persistent_pool is None, recorder)
    return LoaderIterator(_consumer_stages(spec, executor, recorder), epoch_length(spec), recorder)


def start_pool(spec: PipelineSpec) -> WorkerPool | ThreadWorkerPool:
    """Start the loader's workers (after checking memory room, for processes)."""
    options = spec.options
    count = options.num_workers
    per_worker = _per_worker_budget(options.shm_budget, count)
    name = f"dataloader-{os.getpid()}-{next(_pool_ids)}"
    boots = [
        WorkerBoot(
            worker_id=worker_id,
            num_workers=count,
            seed=spec.base_seed,
            dataset=spec.dataset,
            transform=spec.transform,
            collator=spec.collator,
            worker_init_fn=options.worker_init_fn,
            shm_budget=per_worker,
            name=f"{name}-w{worker_id}",
            stream_batch_size=spec.sampler.batch_size if _workers_read_stream(spec) else None,
            close_fds=(),
        )
        for worker_id in range(count)
    ]
    if options.worker_type == "thread":
        return ThreadWorkerPool(boots)
    check_worker_memory(count, None, per_worker * count)
    if not hasattr(os, "memfd_create"):  # segments then live in /dev/shm
        check_shm(per_worker * count)
    return WorkerPool(boots, options.context())


def epoch_length(spec: PipelineSpec) -> int | None:
    """Batches in one epoch, or None for a stream."""
    return None if spec.is_stream else len(spec.sampler)


def _serial_executor(spec: PipelineSpec, epoch: int, recorder: Recorder) -> SerialExecutor:
    maker = BatchMaker(
        spec.dataset, spec.transform, spec.collator, spec.options.seed, restore_random_state=True
    )
    tasks, closer = _main_process_tasks(spec, epoch)
    return SerialExecutor(tasks, maker, closer, recorder)


def _parallel_executor(
    spec: PipelineSpec, epoch: int, pool: Any, owns_pool: bool, recorder: Recorder
) -> ParallelExecutor:
    tasks, closer = (None, None) if _workers_read_stream(spec) else _main_process_tasks(spec, epoch)

    def on_close() -> None:
        if closer is not None:
            closer()
        if owns_pool:
            pool.shutdown()

    return ParallelExecutor(pool, tasks, epoch, spec.options, on_close, recorder)


def _consumer_stages(spec: PipelineSpec, upstream: Any, recorder: Recorder) -> Any:
    adapter = spec.adapter
    if spec.options.preload:
        upstream = Preload(upstream, adapter, spec.options.preload_depth, recorder)
    elif adapter.name != "numpy":
        upstream = Stage(upstream, lambda batch: adapter.ready(adapter.convert(batch)))
    for transform in spec.batch_transforms:
        upstream = apply_batch_transform(upstream, transform)
    return upstream


def _main_process_tasks(spec: PipelineSpec, epoch: int) -> tuple[Iterator[BatchTask], Any]:
    """The epoch's tasks as the main process reads them, and a closer (or None)."""
    if not spec.is_stream:
        return map_tasks(spec.sampler, epoch), None
    stream: Any = iter(spec.dataset)
    closer = None
    if spec.options.timeout > 0:
        stream = TimedStream(stream, spec.options.timeout)
        closer = stream.close
    return stream_tasks(stream, spec.sampler.batch_size, epoch), closer


def _workers_read_stream(spec: PipelineSpec) -> bool:
    return spec.is_stream and spec.options.parallel_stream


# Without a budget each worker may keep this much shared memory (a cap, not a
# reservation: segments are made only as batches need them), at most a
# quarter of the memory available split between the workers.
_DEFAULT_WORKER_BUDGET = 512 * 2**20
_MIN_WORKER_BUDGET = 16 * 2**20


def _per_worker_budget(total: int | None, count: int) -> int:
    if total is not None:
        return max(1, total // count)
    room = memory_room().available // (4 * count)
    return max(_MIN_WORKER_BUDGET, min(_DEFAULT_WORKER_BUDGET, room))


_pool_ids = itertools.count()
