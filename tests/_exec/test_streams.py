"""Stream datasets in workers: read by the main process, or sharded by the workers themselves."""

from __future__ import annotations

import collections
import os

import pytest

from dataloader import DataLoader, StreamSampler
from tests.harness import assert_parallel_equals_serial, collect

from ._fixtures import PidTransform, RangeStream, ShardedStream

# -- parallel_stream=False: the main process reads, workers transform and collate ---


@pytest.mark.parametrize("length, batch_size", [(30, 4), (32, 4), (3, 8)])
def test_main_process_stream_matches_serial(no_leaks, start_method, length, batch_size):
    def make(**kwargs):
        return DataLoader(RangeStream(length), StreamSampler(batch_size=batch_size), **kwargs)

    serial = assert_parallel_equals_serial(make, multiprocessing_context=start_method)
    sizes = [len(b["index"]) for b in serial]
    assert sum(sizes) == length
    assert sizes[:-1] == [batch_size] * (len(sizes) - 1)  # only the last may be short


def test_main_process_reads_the_stream_and_workers_transform(no_leaks):
    loader = DataLoader(
        RangeStream(40), StreamSampler(batch_size=4), transform=PidTransform(), num_workers=2,
        multiprocessing_context="fork",
    )
    batches = collect(loader)
    readers = {int(p) for b in batches for p in b["reader"]}
    transformers = {int(p) for b in batches for p in b["transform_pid"]}
    assert readers == {os.getpid()}, "the stream was read outside the main process"
    assert os.getpid() not in transformers and len(transformers) == 2
    assert {int(w) for b in batches for w in b["transform_worker"]} == {0, 1}


def test_main_process_stream_out_of_order(no_leaks):
    loader = DataLoader(RangeStream(50), StreamSampler(batch_size=4), num_workers=3, in_order=False,
                        multiprocessing_context="fork")
    indices = sorted(int(i) for b in collect(loader) for i in b["index"])
    assert indices == list(range(50))


# -- parallel_stream=True: each worker reads its own shard --------------------------


def _sharded(length, batch_size, num_workers, **kwargs):
    return DataLoader(
        ShardedStream(length), StreamSampler(batch_size=batch_size), num_workers=num_workers,
        parallel_stream=True, **kwargs,
    )


def _expected_sizes(length, batch_size, num_workers):
    """Batch sizes when worker w yields range(w, length, num_workers) in batches of batch_size."""
    sizes = []
    for worker in range(num_workers):
        shard = len(range(worker, length, num_workers))
        sizes += [batch_size] * (shard // batch_size) + ([shard % batch_size] if shard % batch_size else [])
    return sorted(sizes)


def _check_sharded_epoch(batches, length, batch_size, num_workers):
    indices = [int(i) for b in batches for i in b["index"]]
    counts = collections.Counter(indices)
    assert sorted(counts) == list(range(length)), f"missing: {sorted(set(range(length)) - set(counts))}"
    assert max(counts.values(), default=1) == 1, f"repeated: {[i for i, n in counts.items() if n > 1]}"
    assert sorted(len(b["index"]) for b in batches) == _expected_sizes(length, batch_size, num_workers)
    for b in batches:  # a batch comes from one worker's shard
        ids = {int(w) for w in b["id"]}
        assert len(ids) == 1 and all(int(i) % num_workers == next(iter(ids)) for i in b["index"])


@pytest.mark.parametrize(
    "length, batch_size, num_workers",
    [
        (22, 4, 2),  # both shards end in a partial batch
        (23, 5, 3),
        (7, 10, 2),  # every shard is one partial batch
        (3, 2, 4),  # worker 3's shard is empty
        (1, 4, 3),  # two empty shards
    ],
)
def test_sharded_stream_yields_every_sample_once(no_leaks, start_method, length, batch_size, num_workers):
    batches = collect(_sharded(length, batch_size, num_workers, multiprocessing_context=start_method))
    _check_sharded_epoch(batches, length, batch_size, num_workers)


def test_sharded_stream_with_no_samples_at_all(no_leaks):
    assert collect(_sharded(0, 4, 2, multiprocessing_context="fork")) == []


@pytest.mark.parametrize("in_order", [True, False])
def test_sharded_stream_out_of_order_and_prefetch(no_leaks, in_order):
    for prefetch_factor in (1, 3):
        batches = collect(_sharded(45, 4, 3, in_order=in_order, prefetch_factor=prefetch_factor,
                                   multiprocessing_context="fork"))
        _check_sharded_epoch(batches, 45, 4, 3)


def test_sharded_stream_with_persistent_workers(no_leaks):
    loader = _sharded(22, 4, 2, persistent_workers=True, multiprocessing_context="fork")
    pids = []
    for _ in range(3):
        batches = collect(loader)
        _check_sharded_epoch(batches, 22, 4, 2)
        pids.append({int(p) for b in batches for p in b["pid"]})
    # An epoch left early, then a full one.
    for _ in loader:
        break
    _check_sharded_epoch(collect(loader), 22, 4, 2)
    loader.close()
    assert pids[0] == pids[1] == pids[2]


def test_worker_info_in_stream_workers(no_leaks, start_method):
    batches = collect(_sharded(24, 3, 3, seed=4, multiprocessing_context=start_method))
    infos = {}
    for b in batches:
        for k in range(len(b["index"])):
            infos.setdefault(int(b["pid"][k]), set()).add(
                tuple(int(b[key][k]) for key in ("id", "num_workers", "seed", "idx", "worker", "same_dataset", "frozen"))
            )
    assert os.getpid() not in infos and len(infos) == 3
    rows = []
    for seen in infos.values():
        assert len(seen) == 1
        (row,) = seen
        wid, num_workers, seed, idx, worker, same_dataset, frozen = row
        assert num_workers == worker == 3 and idx == wid
        assert same_dataset == 1, "info.dataset is not the stream the worker reads"
        assert frozen == 1, "WorkerInfo could be modified"
        rows.append(row)
    assert sorted(r[0] for r in rows) == [0, 1, 2]
    assert len({r[2] for r in rows}) == 3, "stream workers share a seed"


@pytest.mark.parametrize("leave_early", [False, True])
def test_main_process_stream_with_timeout_reads_in_a_thread_that_stops(no_leaks, leave_early):
    """timeout > 0 reads the stream in a helper thread; it must match serial and not outlive the epoch."""
    def make(**kwargs):
        return DataLoader(RangeStream(30), StreamSampler(batch_size=4), timeout=10, **kwargs)

    if not leave_early:
        assert_parallel_equals_serial(make, multiprocessing_context="fork")
        return
    for num_workers in (0, 2):
        loader = make(num_workers=num_workers, multiprocessing_context="fork")
        for batch in loader:
            assert list(batch["index"]) == [0, 1, 2, 3]
            break
        del batch
