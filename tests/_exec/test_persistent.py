"""``persistent_workers=True``: one set of workers serves every epoch, and stops with the loader."""

from __future__ import annotations

import time

import numpy as np
import psutil
import pytest

from dataloader import DataLoader, DataLoaderError, LoaderTimeoutError, RandomSampler, SequentialSampler
from tests.harness import assert_processes_stop, assert_same_batches, collect

from ._fixtures import LoggingNestedDataset, PidDataset, read_lines

LARGE = (3, 64, 64)


def _sampler(dataset, epoch=None):
    sampler = RandomSampler(dataset, batch_size=8, seed=21)
    if epoch is not None:
        sampler.set_epoch(epoch)
    return sampler


def _expected(dataset, epoch):
    """Epoch ``epoch`` made serially, without its pids."""
    return [_without_pid(b) for b in collect(DataLoader(dataset, _sampler(dataset, epoch)))]


def _without_pid(batch):
    return {k: v for k, v in batch.items() if k != "pid"}


def _pids(batches):
    return {int(p) for b in batches for p in b["pid"]}


def _wait_for_reads(log, count, limit=10.0):
    deadline = time.monotonic() + limit
    while len(read_lines(log)) < count and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(read_lines(log)) >= count, "the worker did not read ahead"


def _assert_stopped(pids):
    assert_processes_stop(pids, within=5)


@pytest.mark.parametrize("image_shape", [(3, 4, 4), LARGE], ids=["inline", "shared"])
def test_same_workers_serve_every_epoch(no_leaks, start_method, image_shape):
    dataset = PidDataset(60, image_shape)
    loader = DataLoader(
        dataset, _sampler(dataset), num_workers=2, persistent_workers=True,
        multiprocessing_context=start_method,
    )
    pids = []
    for epoch in range(3):
        batches = collect(loader)
        assert_same_batches(_expected(dataset, epoch), [_without_pid(b) for b in batches])
        pids.append(_pids(batches))
    assert len(pids[0]) == 2
    assert pids[0] == pids[1] == pids[2], f"worker pids changed between epochs: {pids}"
    loader.close()
    _assert_stopped(pids[0])


def _segments_mapped() -> set[str]:
    """The loader's shared-memory segments mapped in this process (memfd names)."""
    with open("/proc/self/maps") as maps:
        return {line.split(None, 5)[5].strip() for line in maps if "memfd:dataloader-" in line}


def test_an_epoch_left_early_does_not_leak_into_the_next(no_leaks):
    dataset = PidDataset(128, LARGE)
    num_workers, prefetch_factor, epochs = 2, 2, 10
    loader = DataLoader(
        dataset, RandomSampler(dataset, batch_size=16, seed=21), num_workers=num_workers,
        prefetch_factor=prefetch_factor, persistent_workers=True, multiprocessing_context="fork",
    )
    expected = [_without_pid(b) for b in collect(DataLoader(dataset, RandomSampler(dataset, batch_size=16, seed=21)))]
    pids = set()
    for epoch in range(epochs):
        for taken, batch in enumerate(loader):
            pids |= _pids([batch])
            if taken == epoch % 2:
                break  # leave with the other batches of this epoch still in flight
        del batch
    full = collect(loader)
    sampler = RandomSampler(dataset, batch_size=16, seed=21)
    sampler.set_epoch(epochs)
    assert_same_batches(
        [_without_pid(b) for b in collect(DataLoader(dataset, sampler))], [_without_pid(b) for b in full]
    )
    assert expected  # epoch 0 for reference: the full epoch is not just a replay of it
    assert not all(
        (a["label"] == b["label"]).all() for a, b in zip(expected, [_without_pid(b) for b in full])
    )
    pids |= _pids(full)
    # At most: which worker is free first depends on the machine's load (one may serve them all).
    assert len(pids) <= num_workers, f"more workers than {num_workers} served the loader: {pids}"
    # Stale batches of abandoned epochs must give their segments back, or each
    # epoch makes new ones. A worker never needs more at once than the batches
    # the main process may hold for it (num_workers * prefetch_factor), plus one
    # the user holds and one it is writing.
    mapped = _segments_mapped()
    bound = num_workers * (num_workers * prefetch_factor + 2)
    assert len(mapped) <= bound, f"{len(mapped)} segments mapped after {epochs} abandoned epochs"
    loader.close()
    _assert_stopped(pids)


def test_iterator_closed_mid_epoch_then_full_epoch(no_leaks):
    dataset = PidDataset(64, (3, 4, 4))
    loader = DataLoader(dataset, _sampler(dataset), num_workers=3, persistent_workers=True,
                        multiprocessing_context="fork")
    it = iter(loader)
    first = collect([next(it)])
    it.close()
    assert_same_batches(_expected(dataset, 0)[:1], [_without_pid(b) for b in first])
    second = collect(loader)
    assert_same_batches(_expected(dataset, 1), [_without_pid(b) for b in second])
    loader.close()


def test_del_loader_stops_persistent_workers(no_leaks, start_method):
    dataset = PidDataset(32, (3, 4, 4))
    loader = DataLoader(
        dataset, _sampler(dataset), num_workers=2, persistent_workers=True,
        multiprocessing_context=start_method,
    )
    pids = _pids(collect(loader))
    assert pids and all(psutil.pid_exists(pid) for pid in pids), "workers did not persist"
    del loader  # no explicit close(), no gc.collect(): dropping the last reference stops them
    _assert_stopped(pids)


def test_close_is_idempotent_and_iteration_restarts_workers(no_leaks):
    dataset = PidDataset(32, (3, 4, 4))
    loader = DataLoader(dataset, _sampler(dataset), num_workers=2, persistent_workers=True,
                        multiprocessing_context="fork")
    before = _pids(collect(loader))
    loader.close()
    loader.close()
    _assert_stopped(before)
    after = collect(loader)
    assert_same_batches(_expected(dataset, 1), [_without_pid(b) for b in after])
    assert _pids(after).isdisjoint(before)
    loader.close()
    _assert_stopped(_pids(after))


def test_new_epoch_while_the_user_holds_batches_of_an_abandoned_one(no_leaks, tmp_path):
    """A worker left waiting for room by an abandoned epoch must not stall the next epoch.

    One worker, room for two segments. The user holds batches 0 and 1 of epoch
    0, so the worker making batch 2 finds its budget full and says so
    (WaitingForRoom). Batch 1 is held back (a gate) until batch 0 is handed
    out, so that notice arrives in the same read as batch 1, and epoch 0 hands
    out batch 1 without answering it; then the user leaves epoch 0, still
    holding both batches. Epoch 1 must still complete (its batches may travel
    through the pipe instead).
    """
    log, gate = str(tmp_path / "reads.log"), str(tmp_path / "gate")
    dataset = LoggingNestedDataset(32 * 6, LARGE, log, gate=gate, gated_index=32)
    loader = DataLoader(
        dataset, SequentialSampler(dataset, batch_size=32), num_workers=1, persistent_workers=True,
        shm_budget=2**20, timeout=10, multiprocessing_context="fork",
    )
    try:
        it = iter(loader)
        held = [next(it)]
        open(gate, "w").close()
        _wait_for_reads(log, 3 * 32)  # batch 2 read: the worker is about to wait for room
        time.sleep(0.3)  # ... and has said so, right after sending batch 1
        held.append(next(it))
        it.close()
        del it
        labels = [b["label"].copy() for b in loader]
        assert np.array_equal(np.concatenate(labels), np.arange(32 * 6) % 7)
        assert [int(x) for x in held[1]["meta"][0][:2]] == [32, 33]  # still intact
    finally:
        loader.close()


def test_a_superseded_epoch_does_not_hang(no_leaks):
    """With persistent workers, starting epoch 2 while epoch 1's iterator is still alive.

    Epoch 2 must be complete and correct. Epoch 1's iterator shares the
    workers, whose answers epoch 2 now receives: going on with it raises a
    clear error, never waits for batches that will not come, and never ends
    quietly as if the epoch were complete.
    """
    dataset = PidDataset(64, (3, 4, 4))
    loader = DataLoader(dataset, _sampler(dataset), num_workers=2, persistent_workers=True, timeout=5,
                        multiprocessing_context="fork")
    try:
        first = iter(loader)
        next(first)
        second = collect(loader)
        assert_same_batches(_expected(dataset, 1), [_without_pid(b) for b in second])
        with pytest.raises(DataLoaderError, match="superseded by a newer iter") as info:
            for _ in first:
                pass
        assert not isinstance(info.value, LoaderTimeoutError), "it waited for batches epoch 2 took"
        first.close()
    finally:
        loader.close()


class _SlowFirstBatchOfWorkerOne:
    """Sample ``i`` is ``(float32[4] filled with i, i)``; the first time a process loads sample 4
    (batch 1 of batch size 4, worker 1's first) it takes 0.5 s."""

    slowed = False

    def __len__(self) -> int:
        return 32

    def __getitem__(self, index: int):
        if index == 4 and not _SlowFirstBatchOfWorkerOne.slowed:
            _SlowFirstBatchOfWorkerOne.slowed = True
            time.sleep(0.5)
        return np.full(4, index, np.float32), index


def test_a_workers_first_batch_arriving_after_its_epoch_still_describes_the_later_ones(no_leaks):
    # A worker describes a batch's structure in full only in its first batch. When that batch
    # belongs to an epoch left early, the next epoch throws it away unread, and must still learn
    # the description: every later batch of that worker names it only by number.
    dataset = _SlowFirstBatchOfWorkerOne()
    loader = DataLoader(dataset, SequentialSampler(dataset, batch_size=4), num_workers=2,
                        persistent_workers=True, multiprocessing_context="fork")
    try:
        it = iter(loader)
        first = next(it)  # worker 0's batch; worker 1 is still on its first
        it.close()
        del first
        expected = collect(DataLoader(dataset, SequentialSampler(dataset, batch_size=4)))
        assert_same_batches(expected, collect(loader))
    finally:
        loader.close()
