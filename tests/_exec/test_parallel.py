"""Parallel execution over map datasets: same batches as serial, in either transport path.

Also: ``in_order=False``, the ``prefetch_factor`` bound, ``get_worker_info`` and
``worker_init_fn`` inside workers.
"""

from __future__ import annotations

import collections
import functools
import gc
import mmap
import multiprocessing
import os
import time
import weakref

import numpy as np
import pytest

from dataloader import Collator, DataLoader, RandomSampler, SequentialSampler, StreamSampler, get_worker_info
from dataloader._exec.parallel import ParallelExecutor
from dataloader._options import LoaderOptions
from dataloader._stages.task import BatchTask
from dataloader._transport.arena import TRIM_WINDOW
from dataloader._transport.codec import INLINE_LIMIT
from dataloader._transport.mapping import _Mapping
from dataloader._workers.loop import WorkerBoot
from dataloader._workers.pool import WorkerPool
from dataloader._workers.threads import ThreadWorkerPool
from dataloader.transform import PseudoTransform
from tests.harness import assert_parallel_equals_serial, assert_same, assert_same_batches, collect, owned

from ._fixtures import (
    LoggingNestedDataset,
    ArrowCollator,
    CountingStream,
    GatedDataset,
    LoggingDataset,
    NestedDataset,
    WhoAmIDataset,
    read_lines,
    record_init,
    parallel_executor,
    settled_batches as _settled,
)

SMALL = (3, 8, 8)  # 4 samples: ~1 KiB per batch, far below the inline limit
LARGE = (3, 64, 64)  # 32 samples: 384 KiB of images per batch, the shared-memory path


def _nbytes(batch) -> int:
    if isinstance(batch, np.ndarray):
        return batch.nbytes
    if isinstance(batch, dict):
        return sum(_nbytes(v) for v in batch.values())
    if isinstance(batch, (list, tuple)):
        return sum(_nbytes(v) for v in batch)
    return 0


def _root(array: np.ndarray):
    """The object at the end of ``array``'s ``.base`` chain (through memoryviews)."""
    base = array
    while True:
        if isinstance(base, np.ndarray) and base.base is not None:
            base = base.base
        elif isinstance(base, memoryview) and base.obj is not None:
            base = base.obj
        else:
            return base


def _nested_loader(length, image_shape, batch_size, drop_last=False, sampler_kind="sequential", **kwargs):
    dataset = NestedDataset(length, image_shape)
    if sampler_kind == "random":
        sampler = RandomSampler(dataset, batch_size=batch_size, drop_last=drop_last, seed=7)
    else:
        sampler = SequentialSampler(dataset, batch_size=batch_size, drop_last=drop_last)
    return DataLoader(dataset, sampler, **kwargs)


# -- parallel == serial ----------------------------------------------------------


@pytest.mark.parametrize(
    "image_shape, batch_size",
    [pytest.param(SMALL, 4, id="inline"), pytest.param(LARGE, 32, id="shared")],
)
def test_nested_samples_match_serial(no_leaks, start_method, image_shape, batch_size):
    # 70 samples: a final short batch in both sizes.
    make = functools.partial(_nested_loader, 70, image_shape, batch_size, multiprocessing_context=start_method)
    serial = assert_parallel_equals_serial(make)
    assert len(serial) == -(-70 // batch_size)
    assert len(serial[-1]["label"]) == 70 % batch_size
    assert type(serial[0]["meta"][2]).__name__ == "Point"
    assert serial[0]["name"][:2] == ["sample-0", "sample-1"]


@pytest.mark.parametrize("image_shape, batch_size", [(SMALL, 4), (LARGE, 32)], ids=["small", "large"])
def test_thread_workers_match_serial(no_leaks, image_shape, batch_size):
    make = functools.partial(_nested_loader, 70, image_shape, batch_size, sampler_kind="random")
    assert_parallel_equals_serial(make, worker_counts=(1, 3), worker_type="thread")


@pytest.mark.parametrize("image_shape, batch_size", [(SMALL, 4), (LARGE, 32)], ids=["inline", "shared"])
def test_batches_take_the_expected_transport_path(no_leaks, image_shape, batch_size):
    loader = _nested_loader(64, image_shape, batch_size, num_workers=2, multiprocessing_context="fork")
    roots = []
    for batch in loader:
        expect_shared = _nbytes(batch) > INLINE_LIMIT
        assert expect_shared == (image_shape == LARGE)
        roots.append(type(_root(batch["image"])))
        del batch
    # Shared batches view a segment's mapping: libc's (held by _Mapping) or, without ctypes, Python's mmap.
    wanted = (_Mapping, mmap.mmap) if image_shape == LARGE else (bytearray,)
    assert roots and all(root in wanted for root in roots)


@pytest.mark.parametrize("image_shape, batch_size", [(SMALL, 4), (LARGE, 32)], ids=["inline", "shared"])
def test_drop_last_and_random_sampler_match_serial(no_leaks, image_shape, batch_size):
    make = functools.partial(
        _nested_loader, 70, image_shape, batch_size, drop_last=True, sampler_kind="random",
        multiprocessing_context="fork",
    )
    serial = assert_parallel_equals_serial(make)
    assert len(serial) == 70 // batch_size
    assert all(len(b["label"]) == batch_size for b in serial)
    order = np.concatenate([b["meta"][0] for b in serial])
    assert not np.array_equal(order, np.sort(order)), "RandomSampler gave sequential order"


@pytest.mark.parametrize("image_shape", [SMALL, LARGE], ids=["inline", "shared"])
def test_arrow_batches_match_serial(no_leaks, start_method, image_shape):
    dataset = NestedDataset(100, image_shape)

    def make(**kwargs):
        return DataLoader(dataset, SequentialSampler(dataset, batch_size=16), collator=ArrowCollator(), **kwargs)

    serial = assert_parallel_equals_serial(make, multiprocessing_context=start_method)
    assert serial[-1]["table"].num_rows == 4
    held = list(make(num_workers=2, multiprocessing_context=start_method))  # views kept alive
    assert [b["table"] for b in held] == [b["table"] for b in serial]


def test_held_batches_are_never_overwritten(no_leaks):
    """Views the user keeps stay intact while later batches reuse the workers' memory."""
    dataset = NestedDataset(256, LARGE)
    sampler = SequentialSampler(dataset, batch_size=32)
    expected = collect(DataLoader(dataset, sampler))
    # A small budget forces segment reuse (and the pipe fallback) while views are held.
    loader = DataLoader(dataset, sampler, num_workers=2, shm_budget=4 * 2**20, multiprocessing_context="fork")
    held = list(loader)
    assert_same_batches(expected, [owned(b) for b in held])
    del held


def test_a_worker_waiting_for_room_is_sent_its_release(no_leaks, tmp_path, caplog):
    """With its budget full of held batches a worker waits; their drop must reach it as a
    message of its own (no task may come), not end in the pipe fallback."""
    log = str(tmp_path / "reads.log")
    dataset = LoggingNestedDataset(32 * 8, LARGE, log)
    loader = DataLoader(dataset, SequentialSampler(dataset, batch_size=32), num_workers=1, prefetch_factor=2,
                        shm_budget=2**20, timeout=10, multiprocessing_context="fork")
    with caplog.at_level("DEBUG", logger="dataloader"):
        it = iter(loader)
        held = [next(it), next(it)]  # both of the worker's segments lent
        assert 2 in _settled(log, 32), "the worker did not start batch 2"  # ... and waits for room
        assert [int(b["meta"][0][0]) for b in held] == [0, 32]
        del held
        rest = [int(b["meta"][0][0]) for b in it]
    assert rest == [32 * b for b in range(2, 8)]
    assert not [r for r in caplog.records if "through a pipe" in r.getMessage()], "fell back to the pipe"


def test_shared_memory_a_burst_of_held_batches_made_is_given_back(no_leaks):
    """Holding 20 batches makes the worker create 20 segments; once they are dropped and the
    loader runs on, it retires all but what its batches need, without touching a held view."""
    held_count, after = 20, 2 * TRIM_WINDOW + 8
    dataset = NestedDataset(32 * (held_count + after + 4), LARGE)
    sampler = SequentialSampler(dataset, batch_size=32)
    serial = iter(DataLoader(dataset, sampler))
    expected = [owned(next(serial)) for _ in range(6)][5]
    loader = DataLoader(dataset, sampler, num_workers=1, multiprocessing_context="fork")
    with iter(loader) as it:
        segments = parallel_executor(it)._pool.receiver._maps  # the worker's segments the main process maps
        held = [next(it) for _ in range(held_count)]
        burst = len(segments)
        assert burst >= held_count
        keep = held.pop(5)  # one batch stays held throughout
        del held
        for k in range(after):
            batch = next(it)
            assert int(batch["meta"][0][0]) == 32 * (held_count + k)
        # Lent at once at most: the kept batch, the current one, two in flight and a release or
        # two on their way; plus one spare.
        assert len(segments) <= 7, (burst, len(segments))
        assert_same(owned(keep), expected)
        del batch


class _AnnouncingCollator(Collator):
    """Collates, then marks the batch (by its first sample) made, for a consumer that waits on it."""

    def __init__(self, made, changed) -> None:
        super().__init__()
        self.made, self.changed = made, changed

    def apply(self, inputs):
        batch = super().apply(inputs)
        with self.changed:
            self.made[int(batch["meta"][0][0]) // 32] = 1
            self.changed.notify_all()
        return batch


def test_a_slow_consumers_releases_ride_on_the_next_task(no_leaks, monkeypatch):
    """When each batch is made before the training step asks for it, the segment of the batch
    just dropped travels inside the next task: one message a batch to the workers, not two."""
    sent = collections.Counter()
    send = WorkerPool.send

    def counting_send(pool, worker, message):
        sent[type(message).__name__ + ("+released" if getattr(message, "released", ()) else "")] += 1
        return send(pool, worker, message)

    monkeypatch.setattr(WorkerPool, "send", counting_send)
    context = multiprocessing.get_context("fork")
    made, changed = mmap.mmap(-1, 24), context.Condition()  # shared with the forked workers
    dataset = NestedDataset(32 * 24, LARGE)
    loader = DataLoader(dataset, SequentialSampler(dataset, batch_size=32), num_workers=2,
                        collator=_AnnouncingCollator(made, changed), multiprocessing_context="fork")
    starts = []
    for batch in loader:
        starts.append(int(batch["meta"][0][0]))
        # The training step outlasts the making of the next batch, however busy the machine:
        # it waits until a worker has collated it, then a little longer for its message.
        following = len(starts)
        with changed:
            assert changed.wait_for(lambda: following >= 24 or made[following], timeout=60)
        time.sleep(0.05)
    assert starts == [32 * k for k in range(24)]
    # 24 tasks: the first 4 have nothing to carry; the last batches' segments have no task
    # left to ride on. Before, every batch's release went alone (23 messages).
    assert sent["RunTask+released"] >= 16, dict(sent)
    assert sent["ReleaseSegments"] <= 6, dict(sent)


# -- in_order=False --------------------------------------------------------------


def _index_batches(batches) -> list[tuple[int, ...]]:
    return [tuple(int(i) for i in b["index"]) for b in batches]


def test_out_of_order_yields_every_batch_once(no_leaks, start_method):
    dataset = NestedDataset(50, SMALL)

    def make(**kwargs):
        return DataLoader(dataset, RandomSampler(dataset, batch_size=4, seed=3), **kwargs)

    serial = collect(make())
    parallel = collect(make(num_workers=2, in_order=False, multiprocessing_context=start_method))
    key = lambda b: tuple(b["meta"][0])  # noqa: E731
    assert sorted(map(key, parallel)) == sorted(map(key, serial))
    assert_same_batches(sorted(serial, key=key), sorted(parallel, key=key))


def test_out_of_order_does_not_wait_for_a_slow_batch(no_leaks, tmp_path):
    gate = str(tmp_path / "gate")
    dataset = GatedDataset(24, gate, gated_index=0)
    loader = DataLoader(
        dataset, SequentialSampler(dataset, batch_size=4), num_workers=2, in_order=False,
        multiprocessing_context="fork",
    )
    seen = []
    for batch in loader:
        seen.append(tuple(int(i) for i in batch["index"]))
        open(gate, "w").close()  # batch 0 may finish only now
    assert seen[0] != (0, 1, 2, 3), "the gated batch 0 came first: delivery waited for it"
    assert sorted(seen) == [tuple(range(k, k + 4)) for k in range(0, 24, 4)]


def test_in_order_waits_for_a_slow_batch(no_leaks, tmp_path):
    """The contrast: in order, batch 0 comes first even when it is the slowest (the gate opens on a timer)."""
    gate = str(tmp_path / "gate")
    dataset = GatedDataset(24, gate, gated_index=0, limit=0.5)
    loader = DataLoader(dataset, SequentialSampler(dataset, batch_size=4), num_workers=2, multiprocessing_context="fork")
    assert _index_batches(collect(loader)) == [tuple(range(k, k + 4)) for k in range(0, 24, 4)]


# -- prefetch_factor -------------------------------------------------------------


@pytest.mark.parametrize("num_workers, prefetch_factor", [(1, 1), (2, 2), (2, 3), (3, 1)])
def test_prefetch_factor_bounds_work_in_flight(no_leaks, tmp_path, num_workers, prefetch_factor):
    log = str(tmp_path / "reads.log")
    batch_size = 2
    dataset = LoggingDataset(200, log)
    loader = DataLoader(
        dataset, SequentialSampler(dataset, batch_size=batch_size), num_workers=num_workers,
        prefetch_factor=prefetch_factor, multiprocessing_context="fork",
    )
    it = iter(loader)
    first = next(it)
    assert list(first["index"]) == [0, 1]
    started = _settled(log, batch_size)
    # The main process keeps at most num_workers * prefetch_factor batches sent
    # and not yet handed out (in a worker, in the pipe or in the reorder buffer);
    # refilling after handing out batch 0 makes that many *besides* the one the
    # consumer holds. The consumer calls next() no more, so nothing else starts.
    bound = num_workers * prefetch_factor + 1
    assert len(started) <= bound, f"{len(started)} batches started; at most {bound} may be"
    assert started == set(range(len(started))), "batches start in sampler order"
    assert len(started) == bound, "the workers did not prefetch up to the bound"
    it.close()


def test_prefetch_factor_bounds_stream_reading(no_leaks):
    """With parallel_stream=False the main process reads only the batches it sends out."""
    stream = CountingStream(10_000)
    batch_size = 5
    loader = DataLoader(stream, StreamSampler(batch_size=batch_size), num_workers=2, prefetch_factor=2,
                        multiprocessing_context="fork")
    it = iter(loader)
    next(it)
    # Same bound as above, counted in samples (the main process reads the stream).
    assert stream.yielded <= (2 * 2 + 1) * batch_size, f"read {stream.yielded} samples ahead"
    assert stream.yielded >= 2 * batch_size
    it.close()


# -- get_worker_info -------------------------------------------------------------


def test_worker_info_is_none_in_the_main_process():
    assert get_worker_info() is None
    dataset = WhoAmIDataset(6)
    batches = collect(DataLoader(dataset, SequentialSampler(dataset, batch_size=3)))
    assert all((b["id"] == -1).all() for b in batches)


def test_worker_info_in_map_workers(no_leaks, start_method):
    dataset = WhoAmIDataset(40)
    sampler = SequentialSampler(dataset, batch_size=4)

    def info_by_pid(seed):
        loader = DataLoader(dataset, sampler, num_workers=3, seed=seed, multiprocessing_context=start_method)
        rows = {}
        for batch in collect(loader):
            for k in range(len(batch["index"])):
                row = {key: int(batch[key][k]) for key in batch if key != "index"}
                rows.setdefault(row.pop("pid"), set()).add(tuple(sorted(row.items())))
        return rows

    rows = info_by_pid(seed=5)
    assert os.getpid() not in rows
    infos = []
    for pid, seen in rows.items():
        assert len(seen) == 1, f"worker {pid} saw several infos: {seen}"
        info = dict(next(iter(seen)))
        assert info["num_workers"] == 3 and info["worker"] == 3
        assert info["idx"] == info["id"]
        assert info["same_dataset"] == 1, "info.dataset is not the dataset the worker reads"
        assert info["frozen"] == 1, "WorkerInfo could be modified"
        infos.append(info)
    assert sorted(i["id"] for i in infos) == list(range(len(infos)))
    assert len({i["seed"] for i in infos}) == len(infos), "workers share a seed"
    again = sorted(dict(next(iter(s)))["seed"] for s in info_by_pid(seed=5).values())
    assert again == sorted(i["seed"] for i in infos), "the same loader seed gave other worker seeds"


def test_worker_info_in_thread_workers(no_leaks):
    dataset = WhoAmIDataset(40)
    loader = DataLoader(dataset, SequentialSampler(dataset, batch_size=4), num_workers=2, worker_type="thread")
    batches = collect(loader)
    ids = {int(i) for b in batches for i in b["id"]}
    assert ids <= {0, 1} and ids, f"thread workers saw ids {ids}"
    for key, value in [("num_workers", 2), ("worker", 2), ("same_dataset", 1), ("frozen", 1)]:
        assert all((b[key] == value).all() for b in batches), key
    assert all((b["idx"] == b["id"]).all() for b in batches)
    assert get_worker_info() is None, "a thread worker's info leaked into the main thread"


# -- worker_init_fn --------------------------------------------------------------


@pytest.mark.parametrize("num_workers", [1, 3])
def test_worker_init_fn_runs_once_per_worker(no_leaks, tmp_path, start_method, num_workers):
    log = str(tmp_path / "init.log")
    dataset = WhoAmIDataset(30)
    loader = DataLoader(
        dataset, SequentialSampler(dataset, batch_size=2), num_workers=num_workers,
        worker_init_fn=functools.partial(record_init, log), multiprocessing_context=start_method,
    )
    batches = collect(loader)
    calls = [tuple(int(x) for x in line.split()) for line in read_lines(log)]
    assert sorted(c[0] for c in calls) == list(range(num_workers)), calls
    assert all(worker_id == info_id for worker_id, _, info_id in calls), "get_worker_info() is unset in init"
    pids = {pid for _, pid, _ in calls}
    assert len(pids) == num_workers and os.getpid() not in pids
    data_pids = {int(p) for b in batches for p in b["pid"]}
    assert data_pids <= pids, "batches came from processes that were not initialised"


# -- the executor's parts ----------------------------------------------------------


def test_a_dropped_executor_goes_at_once_with_the_batches_it_holds(no_leaks):
    """The executor's parts refer to each other without a cycle, so dropping it frees the
    batches waiting in its reorder buffer at once, not at the next garbage collection."""
    boots = [
        WorkerBoot(worker_id=k, num_workers=2, seed=0, dataset=np.arange(16), transform=PseudoTransform(),
                   collator=Collator(), worker_init_fn=None, shm_budget=0, name="executor-test",
                   stream_batch_size=None, close_fds=())
        for k in range(2)
    ]
    pool = ThreadWorkerPool(boots)
    try:
        tasks = iter([BatchTask(0, k, indices=[2 * k, 2 * k + 1]) for k in range(8)])
        executor = ParallelExecutor(pool, tasks, 0, LoaderOptions(num_workers=2))
        made = [next(executor) for _ in range(3)]  # (batch, its tasks, its worker) each
        assert [batch.tolist() for batch, _, _ in made] == [[0, 1], [2, 3], [4, 5]]
        assert [keys for _, keys, _ in made] == [(0,), (1,), (2,)] and {w for _, _, w in made} <= {0, 1}
        del made
        # The reorder buffer holds the batches; the waiter is at the far end of the parts.
        parts = {name: weakref.ref(getattr(executor, name)) for name in ("_reorder", "_waiter")}
        gc.collect()
        gc.disable()
        try:
            del executor
            kept = [name for name, part in parts.items() if part() is not None]
            assert not kept, f"the executor's parts are in a reference cycle: {kept}"
        finally:
            gc.enable()
    finally:
        pool.shutdown()
