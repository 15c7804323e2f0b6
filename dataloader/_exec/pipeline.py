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
from .._device.preload import Buffered, Preload
from .._options import LoaderOptions
from .._stages.batch import BatchMaker
from .._stages.consumer import Echo, Reassemble, Stage, apply_batch_transform
from .._stages.epoch import EpochCut
from .._stages.source import map_tasks, stream_tasks, timed_stream
from .._stages.task import BatchTask
from .._workers.loop import WorkerBoot
from .._workers.pool import WorkerPool
from .._workers.threads import ThreadWorkerPool
from ..callable_source import CallableSource
from ..memory import MemoryRoom, check_shm, check_worker_memory, memory_room
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


def open_epoch(
    spec: PipelineSpec, epoch: int, persistent_pool: Any = None, feed: EpochCut | None = None
) -> LoaderIterator:
    """The iterator of one epoch.

    ``persistent_pool`` is reused (not stopped) when given; ``feed`` carries
    fixed-size epochs over from one epoch to the next.
    """
    options = spec.options
    settings = MonitorSettings.from_env()
    settings.make_visible()
    recorder = Recorder(options.num_workers, settings, options.worker_type)
    if options.num_workers == 0:
        executor = _serial_executor(spec, epoch, recorder, feed)
    else:
        pool = persistent_pool if persistent_pool is not None else start_pool(spec)
        executor = _parallel_executor(spec, epoch, pool, persistent_pool is None, recorder, feed)
    stages = _consumer_stages(spec, executor, recorder)
    return LoaderIterator(stages, epoch_length(spec), recorder)


def open_feed(spec: PipelineSpec) -> EpochCut | None:
    """The source that fixed-size epochs share, or None when epochs are not fixed-size."""
    size = spec.options.epoch_size
    if size is None or workers_read_stream(spec) or isinstance(spec.dataset, CallableSource):
        return None
    if not spec.is_stream:
        return EpochCut(lambda: iter(spec.sampler), size, "indices")

    def batches() -> Iterator[list]:
        stream, closer = _open_stream(spec)
        try:
            for task in stream_tasks(stream, spec.sampler.batch_size, 0):
                yield task.samples
        finally:
            if closer is not None:
                closer()

    return EpochCut(batches, size, "samples")


def start_pool(spec: PipelineSpec) -> WorkerPool | ThreadWorkerPool:
    """Start the loader's workers (after checking memory room, for processes)."""
    options = spec.options
    count = options.num_workers
    threads = options.worker_type == "thread"  # no shared memory: no budget, no room to check
    room = None if threads else memory_room()
    per_worker = 0 if threads else _per_worker_budget(options.shm_budget, count, room)
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
            stream_batch_size=spec.sampler.batch_size if workers_read_stream(spec) else None,
            close_fds=(),
            restart_stream=options.epoch_size is not None,
        )
        for worker_id in range(count)
    ]
    if threads:
        return ThreadWorkerPool(boots)
    check_worker_memory(count, None, per_worker * count, room=room)
    if not hasattr(os, "memfd_create"):  # segments then live in /dev/shm
        check_shm(per_worker * count)
    return WorkerPool(boots, options.context())


def epoch_length(spec: PipelineSpec) -> int | None:
    """Batches handed out in one epoch (echoes included), or None for a stream."""
    options = spec.options
    if options.epoch_size is not None:
        return options.epoch_size * options.repeats
    return None if spec.is_stream else len(spec.sampler) * options.repeats


def _serial_executor(spec: PipelineSpec, epoch: int, recorder: Recorder, feed: EpochCut | None) -> SerialExecutor:
    maker = BatchMaker(
        spec.dataset, spec.transform, spec.collator, spec.options.seed, restore_random_state=True
    )
    tasks, closer = _main_process_tasks(spec, epoch, feed)
    return SerialExecutor(tasks, maker, closer, recorder)


def _parallel_executor(
    spec: PipelineSpec, epoch: int, pool: Any, owns_pool: bool, recorder: Recorder, feed: EpochCut | None
) -> ParallelExecutor:
    if workers_read_stream(spec):
        size = spec.options.epoch_size
        tasks = None if size is None else (BatchTask(epoch, index) for index in range(size))
        closer = None
    else:
        tasks, closer = _main_process_tasks(spec, epoch, feed)

    def on_close() -> None:
        if closer is not None:
            closer()
        if owns_pool:
            pool.shutdown()

    return ParallelExecutor(pool, tasks, epoch, spec.options, on_close, recorder)


def _consumer_stages(spec: PipelineSpec, upstream: Any, recorder: Recorder) -> Any:
    options, adapter = spec.options, spec.adapter
    if isinstance(spec.dataset, CallableSource):
        upstream = Reassemble(upstream, spec.collator)
    if options.buffer_size:
        upstream = Buffered(upstream, options.buffer_size, options.buffer_on_request)
    if options.preload:
        upstream = Preload(upstream, adapter, options.preload_depth, recorder)
    elif adapter.name != "numpy":
        upstream = Stage(upstream, lambda batch: adapter.ready(adapter.convert(batch)))
    for transform in spec.batch_transforms:
        upstream = apply_batch_transform(upstream, transform)
    if options.repeats > 1:
        if options.num_workers == 0 and not (options.preload or options.buffer_size):
            upstream = Buffered(upstream, 1, False)  # make the next batch while echoing this one
        upstream = Echo(upstream, options.repeats)
    return upstream


def _main_process_tasks(spec: PipelineSpec, epoch: int, feed: EpochCut | None) -> tuple[Iterator[BatchTask], Any]:
    """The epoch's tasks as the main process reads them, and a closer (or None)."""
    if isinstance(spec.dataset, CallableSource):
        tasks = spec.dataset.tasks(spec.sampler.batch_size, epoch)
        return _first_batches(tasks, spec.options.epoch_size), None
    if feed is not None:
        return feed.tasks(epoch), None
    if not spec.is_stream:
        return map_tasks(spec.sampler, epoch), None
    stream, closer = _open_stream(spec)
    return stream_tasks(stream, spec.sampler.batch_size, epoch), closer


def _open_stream(spec: PipelineSpec) -> tuple[Iterator, Any]:
    stream: Any = iter(spec.dataset)
    if spec.options.timeout > 0:
        stream = timed_stream(stream, spec.options.timeout)
        return stream, stream.close
    return stream, None


def _first_batches(tasks: Iterator[BatchTask], count: int | None) -> Iterator[BatchTask]:
    """``tasks`` up to the end of the ``count``-th batch (a chunked batch counts once)."""
    if count is None:
        yield from tasks
        return
    done = 0
    for task in tasks:
        yield task
        if task.chunk is None or task.chunk[2] == task.chunk[1] - 1:
            done += 1
        if done == count:
            return


def workers_read_stream(spec: PipelineSpec) -> bool:
    """True when each worker reads its own copy of the stream (``parallel_stream=True``)."""
    return spec.is_stream and spec.options.parallel_stream and not isinstance(spec.dataset, CallableSource)


# Without a budget each worker may keep this much shared memory (a cap, not a
# reservation: segments are made only as batches need them), at most a
# quarter of the memory available split between the workers.
_DEFAULT_WORKER_BUDGET = 512 * 2**20
_MIN_WORKER_BUDGET = 16 * 2**20


def _per_worker_budget(total: int | None, count: int, room: MemoryRoom) -> int:
    if total is not None:
        return max(1, total // count)
    share = room.available // (4 * count)
    return max(_MIN_WORKER_BUDGET, min(_DEFAULT_WORKER_BUDGET, share))


_pool_ids = itertools.count()
