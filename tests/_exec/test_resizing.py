"""The pool grows and shrinks mid-epoch (``num_workers="auto"``) without changing a batch.

A scripted policy stands in for the tuner's, so that the pool changes size at every window
(windows of one batch here) whatever the machine's speed: the mechanics are what is tested.
Proven with process workers under each start method and with thread workers: the batches and
their order equal a fixed pool's, for a map dataset and for a stream read in this process; persistent workers keep the size across epochs; a worker
removed while it holds tasks delivers them; 200 grow/shrink cycles leak no process, thread,
descriptor or shared memory; a resume taken while the pool churns continues exactly; and a
``parallel_stream`` loader keeps its worker count (it decides the shards).
"""

from __future__ import annotations

import itertools
import os
import time

import numpy as np
import pytest

from dataloader import DataLoader, RandomSampler, SequentialSampler, StreamSampler
from dataloader._tune.policy import Decision, Settings
from dataloader.memory import available_cpus
from dataloader import batch_rng
from dataloader.transform import Transform
from tests._exec._fixtures import NestedDataset, RangeStream, ShardedStream, parallel_executor
from tests.harness import assert_same_batches, collect


class _Draw(Transform):
    """Adds a draw from the batch's generator: a random augmentation that must not change."""

    def apply(self, sample: dict) -> dict:
        return {**sample, "draw": batch_rng().random(2)}


class ScriptedPolicy:
    """Sizes the pool from ``sizes``, one per window, round and round."""

    judging = False  # no window is longer than the others

    def __init__(self, sizes: list[int], depth: int = 2) -> None:
        self._sizes = itertools.cycle(sizes)
        self.settings = Settings(sizes[0], depth)
        next(self._sizes)
        self.windows = 0

    def decide(self, window) -> Decision:
        self.windows += 1
        self.settings = Settings(next(self._sizes), self.settings.depth)
        return Decision(self.settings, f"scripted: {self.settings.workers} workers")


def _scripted(loader: DataLoader, sizes: list[int]) -> ScriptedPolicy:
    policy = ScriptedPolicy(sizes)
    loader._pipeline._tuner.policy = policy
    return policy


def _map_loader(num_workers, size: int = 200, batch_size: int = 4, **options) -> DataLoader:
    dataset = NestedDataset(size)
    sampler = RandomSampler(dataset, batch_size=batch_size, seed=5)
    return DataLoader(dataset, sampler, transform=_Draw(), seed=9, num_workers=num_workers, **options)


def _sizes_seen(loader: DataLoader) -> set[int]:
    return {change.workers for change in loader.stats().tuning}


@pytest.mark.parametrize(
    "worker_type, start_method",
    [("process", "fork"), ("process", "spawn"), ("process", "forkserver"), ("thread", None)],
)
def test_batches_equal_a_fixed_pools_while_the_pool_churns(no_leaks, tuned_every_batch, worker_type, start_method):
    fixed = collect(_map_loader(2, worker_type=worker_type, multiprocessing_context=start_method))
    loader = _map_loader("auto", worker_type=worker_type, multiprocessing_context=start_method)
    policy = _scripted(loader, [1, 3, 2, 1, 2])
    churned = collect(loader)
    assert_same_batches(fixed, churned)
    assert policy.windows >= 3, "the pool never changed: the test would prove nothing"
    assert _sizes_seen(loader) >= {1, 2, 3}
    makers = {batch[0] for batch in loader._pipeline._last_recorder.batches}
    assert len(makers) >= 3, f"batches came from workers {makers}: the pool did not change"


@pytest.mark.parametrize("worker_type", ["process", "thread"])
def test_a_stream_read_in_this_process_is_unchanged_while_the_pool_churns(no_leaks, tuned_every_batch, worker_type):
    make = lambda workers: DataLoader(  # noqa: E731
        RangeStream(400), StreamSampler(4), transform=_Draw(), seed=3, num_workers=workers,
        worker_type=worker_type, multiprocessing_context="fork",
    )
    loader = make("auto")
    _scripted(loader, [1, 3, 2])
    assert_same_batches(collect(make(2)), collect(loader))
    assert _sizes_seen(loader) >= {1, 2, 3}


def test_persistent_workers_keep_the_size_the_epoch_before_ended_with(no_leaks, tuned_every_batch):
    loader = _map_loader("auto", persistent_workers=True, multiprocessing_context="fork")
    _scripted(loader, [1, 3])
    first = collect(loader)
    ended = loader._pipeline._tuner.settings.workers
    second = collect(loader)
    starts = [change for change in loader.stats().tuning if change.reason.startswith("start")]
    assert starts and starts[0].workers == ended
    assert "as the epoch before ended" in starts[0].reason
    reference = _map_loader(2, multiprocessing_context="fork")
    assert_same_batches(first, collect(reference))
    assert_same_batches(second, collect(reference))
    loader.close()


class _SlowNested(NestedDataset):
    """Each sample takes 20 ms: a worker always has tasks in hand when it is told to go."""

    def __getitem__(self, index: int) -> dict:
        time.sleep(0.02)
        return super().__getitem__(index)


def test_a_worker_removed_while_it_holds_tasks_delivers_them(no_leaks, tuned_every_batch):
    dataset = _SlowNested(64)
    make = lambda workers: DataLoader(  # noqa: E731
        dataset, SequentialSampler(dataset, batch_size=2), num_workers=workers, multiprocessing_context="fork"
    )
    loader = make("auto")
    _scripted(loader, [3] + [1] * 10_000)  # three to start, then one for good
    iterator = iter(loader)
    batches = [collect([next(iterator)])[0] for _ in range(2)]  # the first starts the window, the second ends it
    executor = parallel_executor(iterator)
    leaving = set(executor._dispatcher.leaving)
    held = {w.id: len(w.outstanding) for w in executor._pool.workers if w.id in leaving}
    assert leaving and all(held.values()), f"the workers told to go held no task: {held}"
    decided = time.perf_counter()
    batches += [collect([batch])[0] for batch in iterator]
    assert_same_batches(collect(make(0)), batches)
    recorder = loader._pipeline._last_recorder
    delivered = {batch[0] for batch in recorder.batches if batch[7] >= decided}
    assert leaving & delivered, "the leaving workers' tasks were made by others, or lost"
    assert set(executor._pool.stopped) >= leaving


@pytest.mark.parametrize("worker_type", ["process", "thread"])
def test_two_hundred_grow_and_shrink_cycles_leak_nothing(no_leaks, tuned_every_batch, worker_type):
    dataset = NestedDataset(20_000)
    loader = DataLoader(
        dataset, SequentialSampler(dataset, batch_size=2), num_workers="auto", worker_type=worker_type,
        multiprocessing_context="fork",
    )
    policy = _scripted(loader, [1, 2])
    firsts, descriptors, cycles = [], {}, 0
    with iter(loader) as batches:
        pool = parallel_executor(batches)._pool
        for batch in batches:
            firsts.append(int(batch["meta"][0][0]))
            cycles = policy.windows // 2  # a grow and a shrink each
            if cycles in (10, 200):  # the ones that left are reaped as it runs
                descriptors.setdefault(cycles, len(os.listdir("/proc/self/fd")))
            if cycles >= 200:
                break
        started, stopped = len(pool.workers), len(pool.stopped)
    # A grow starts a worker, or takes back the one still leaving (on a busy machine most may
    # be taken back, as a leaving worker answers late): counted by the decisions, not the starts.
    assert cycles >= 200, f"only {cycles} grow and shrink cycles in the whole epoch"
    assert started - stopped <= 3, f"{started} workers started, only {stopped} stopped"
    assert firsts == list(range(0, 2 * len(firsts), 2))
    assert descriptors[200] - descriptors[10] < 20, f"descriptors grew from {descriptors[10]} to {descriptors[200]}"


def test_a_resume_taken_while_the_pool_churns_continues_exactly(no_leaks, tuned_every_batch):
    whole_loader = _map_loader("auto", multiprocessing_context="fork")
    _scripted(whole_loader, [1, 3, 2])
    whole = collect(whole_loader)
    loader = _map_loader("auto", multiprocessing_context="fork")
    _scripted(loader, [2, 1, 3])
    with iter(loader) as batches:
        head = [collect([next(batches)])[0] for _ in range(9)]
        state = loader.state_dict()
    resumed = _map_loader("auto", worker_type="thread")
    _scripted(resumed, [3, 1])
    resumed.load_state_dict(state)
    assert_same_batches(whole, head + collect(resumed))


def test_parallel_stream_keeps_its_worker_count(no_leaks):
    count = max(1, available_cpus() - 1)
    make = lambda workers: DataLoader(  # noqa: E731
        ShardedStream(40), StreamSampler(4), num_workers=workers, parallel_stream=True, multiprocessing_context="fork"
    )
    loader = make("auto")
    batches = [batch["index"].tolist() for batch in loader]
    assert batches == [batch["index"].tolist() for batch in make(count)]
    assert loader.state_dict()["config"]["stream_workers"] == count
    assert all(change.workers == count for change in loader.stats().tuning)
