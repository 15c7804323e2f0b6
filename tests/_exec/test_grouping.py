"""Several small batches per message (``batches_per_message``): how many, and that a grouped
epoch is the serial epoch, in order, with the prefetch bound, errors, deaths and timeouts
reported as they are for one batch per message."""

from __future__ import annotations

import time

import numpy as np
import pytest

import dataloader
from dataloader import DataLoader, RandomSampler, SequentialSampler
from dataloader._exec.grouping import GROUP_SECONDS, MAX_GROUP, MAX_GROUP_BYTES, GroupSize
from dataloader.errors import ArgumentTypeError, ArgumentValueError, WorkerError
from tests._workers._fixtures import DieAt, StuckAt, read_report
from tests.harness import assert_parallel_equals_serial, collect

from ._fixtures import (
    IndexDataset,
    LoggingDataset,
    NestedDataset,
    RandomAugment,
    RangeStream,
    WhoAmIDataset,
    parallel_executor,
    settled_batches,
)

# -- the size of a group ---------------------------------------------------------


def test_a_fixed_size_never_changes():
    group = GroupSize(3)
    assert group.size == 3
    group.observe(10.0, 1 << 30)
    assert group.size == 3


def test_sized_groups_start_at_one_and_grow_for_small_fast_batches():
    group = GroupSize(None)
    assert group.size == 1  # nothing measured yet: the first batches go one by one
    for _ in range(20):
        group.observe(GROUP_SECONDS / 8, 4096)
    assert group.size == 8
    for _ in range(20):
        group.observe(GROUP_SECONDS / 1000, 4096)
    assert group.size == MAX_GROUP


def test_slow_or_big_batches_go_one_by_one():
    slow = GroupSize(None)
    for _ in range(5):
        slow.observe(GROUP_SECONDS * 2, 100)
    assert slow.size == 1
    big = GroupSize(None)
    for _ in range(5):
        big.observe(1e-6, MAX_GROUP_BYTES)
    assert big.size == 1
    medium = GroupSize(None)
    for _ in range(5):
        medium.observe(1e-6, MAX_GROUP_BYTES // 4)
    assert medium.size == 4


def test_the_size_follows_batches_that_get_slower():
    group = GroupSize(None)
    for _ in range(10):
        group.observe(1e-5, 100)
    assert group.size == MAX_GROUP
    for _ in range(20):
        group.observe(GROUP_SECONDS, 100)
    assert group.size == 1


@pytest.mark.parametrize("value, error", [(0, ArgumentValueError), (2.0, ArgumentTypeError), (True, ArgumentTypeError)])
def test_batches_per_message_is_checked(value, error):
    with pytest.raises(error, match="`batches_per_message` must be a positive integer"):
        DataLoader(IndexDataset(8), batch_size=2, num_workers=1, batches_per_message=value)


# -- grouped epochs ----------------------------------------------------------------


def _loader(dataset, batch_size=3, **options):
    return lambda **more: DataLoader(
        dataset, SequentialSampler(dataset, batch_size=batch_size), multiprocessing_context="fork",
        **options, **more,
    )


@pytest.mark.parametrize("per_message", [2, 5])
@pytest.mark.parametrize("in_order", [True, False])
def test_grouped_epochs_equal_the_serial_epoch(no_leaks, per_message, in_order):
    # 34 samples in batches of 3: 12 batches, the last one short, and a short last group.
    make = _loader(IndexDataset(34), batches_per_message=per_message, in_order=in_order)
    if in_order:
        assert_parallel_equals_serial(make, (1, 2, 3))
        return
    serial = collect(make(num_workers=0))
    for workers in (1, 2, 3):
        grouped = collect(make(num_workers=workers))
        assert sorted(b["index"].tolist() for b in grouped) == [b["index"].tolist() for b in serial]


def test_grouped_thread_workers_equal_the_serial_epoch(no_leaks):
    assert_parallel_equals_serial(_loader(NestedDataset(40), batches_per_message=4, worker_type="thread"))


def test_a_message_carries_consecutive_batches_to_one_worker(no_leaks):
    loader = _loader(WhoAmIDataset(4 * 24), 4, batches_per_message=4)(num_workers=2)
    makers = [int(batch["id"][0]) for batch in loader]
    # Batches 4k..4k+3 travel in one message: one worker makes all four.
    assert all(len(set(makers[k : k + 4])) == 1 for k in range(0, 24, 4)), makers
    assert set(makers) == {0, 1}


def test_small_fast_batches_are_grouped_by_default(no_leaks):
    loader = _loader(WhoAmIDataset(8 * 400), 8)(num_workers=2)
    makers = [int(batch["id"][0]) for batch in loader]
    runs, longest = 1, 1
    for before, after in zip(makers, makers[1:]):
        runs = runs + 1 if after == before else 1
        longest = max(longest, runs)
    assert longest >= 4, f"no batches were grouped: {makers}"


def test_an_integer_prefetch_factor_keeps_one_batch_per_message(no_leaks):
    """PyTorch's meaning: ``prefetch_factor=n`` is n batches per worker, never n messages."""
    loader = _loader(WhoAmIDataset(8 * 200), 8, prefetch_factor=2)(num_workers=2)
    with iter(loader) as batches:
        for _ in batches:
            pass
        assert parallel_executor(batches)._dispatcher.group.size == 1


@pytest.mark.parametrize("num_workers, prefetch_factor, per_message", [(1, 1, 3), (2, 2, 3), (2, 1, 4)])
def test_prefetch_factor_counts_messages_when_batches_per_message_is_given(
    no_leaks, tmp_path, num_workers, prefetch_factor, per_message
):
    log = str(tmp_path / "reads.log")
    dataset = LoggingDataset(400, log)
    loader = _loader(dataset, 2, prefetch_factor=prefetch_factor, batches_per_message=per_message)(
        num_workers=num_workers)
    with iter(loader) as batches:
        assert next(batches)["index"].tolist() == [0, 1]
        started = settled_batches(log, 2)
        # Sent and not handed out: at most prefetch_factor messages of per_message batches per
        # worker; a new message goes only once a whole one's room is free.
        bound = num_workers * prefetch_factor * per_message
        assert len(started) == bound, f"{len(started)} batches started; {bound} should have"
        assert started == set(range(bound)), "batches start in sampler order"


def test_an_error_inside_a_group_names_its_worker_and_indices_at_its_turn(no_leaks):
    class FailsAt(IndexDataset):
        def __getitem__(self, index):
            if index == 13:
                raise KeyError("sample 13 is missing")
            return super().__getitem__(index)

    loader = _loader(FailsAt(40), 2, batches_per_message=4)(num_workers=2)
    got = []
    with pytest.raises(KeyError, match="sample 13 is missing") as caught:
        for batch in loader:
            got.append(batch["index"].tolist())
    assert got == [[2 * k, 2 * k + 1] for k in range(6)], "the batches before the failed one, in order"
    error = caught.value
    assert isinstance(error, WorkerError)
    assert error.indices == [12, 13] and error.worker_id in (0, 1)


def test_a_worker_that_dies_inside_a_group_is_reported(no_leaks, tmp_path):
    report_path = str(tmp_path / "fault.json")
    loader = _loader(DieAt(64, 21, "SIGKILL", report_path), 2, batches_per_message=4)(num_workers=2)
    with pytest.raises(dataloader.WorkerDiedError) as caught:
        for _ in loader:
            pass
    report = read_report(report_path)
    assert caught.value.worker_id == report["worker_id"]
    assert "is killed by signal: Killed (SIGKILL)" in str(caught.value)


def test_a_stuck_sample_inside_a_group_times_out(no_leaks, tmp_path):
    report_path = str(tmp_path / "stuck.json")
    loader = _loader(StuckAt(64, 9, report_path), 2, timeout=1.0, batches_per_message=4)(num_workers=2)
    got = []
    started = time.monotonic()
    with pytest.raises(dataloader.LoaderTimeoutError) as caught:
        for batch in loader:
            got.append(int(batch[0, 0]))
    assert time.monotonic() - started < 10
    assert got == [0, 2, 4, 6], "the group before the stuck one arrived"
    report = read_report(report_path)
    assert f"worker {report['worker_id']} (pid {report['pid']})" in str(caught.value)
    assert "[8, 9]" in str(caught.value)


def test_grouped_batches_in_shared_memory_wait_for_room_without_a_deadlock(no_leaks):
    """A worker whose budget is full of held batches sends the answers it holds before it
    waits for room: the main process may be waiting for one of them."""
    dataset = NestedDataset(32 * 12, (3, 64, 64))  # 384 KiB per batch: the shared-memory path
    loader = _loader(dataset, 32, batches_per_message=4, shm_budget=2**20, timeout=20)(num_workers=1)
    with iter(loader) as batches:
        held = [next(batches) for _ in range(3)]  # the budget holds about two of them
        rest = [int(b["meta"][0][0]) for b in batches]
        assert [int(b["meta"][0][0]) for b in held] == [0, 32, 64]
    assert rest == [32 * k for k in range(3, 12)]
    del held


def test_a_stream_read_in_the_main_process_is_grouped_too(no_leaks):
    make = lambda **more: DataLoader(RangeStream(50), dataloader.StreamSampler(batch_size=3),
                                     batches_per_message=3, multiprocessing_context="fork", **more)
    serial = [b["index"].tolist() for b in collect(make(num_workers=0))]
    assert [b["index"].tolist() for b in collect(make(num_workers=2))] == serial


def test_a_source_that_fails_while_a_group_is_gathered_raises_its_error(no_leaks):
    class Breaks:
        """A sampler whose fourth batch fails."""

        def __iter__(self):
            yield from ([0, 1], [2, 3], [4, 5])
            raise RuntimeError("the sampler broke")

        def __len__(self):
            return 5

    loader = DataLoader(IndexDataset(10), Breaks(), num_workers=1, batches_per_message=4,
                        multiprocessing_context="fork")
    got = []
    with pytest.raises(RuntimeError, match="the sampler broke"):
        for batch in loader:
            got.append(batch["index"].tolist())
    assert got == [[0, 1], [2, 3], [4, 5]][: len(got)]


def test_unseeded_workers_still_draw_differently_in_grouped_batches(no_leaks):
    loader = _loader(IndexDataset(64), 2, transform=RandomAugment(), batches_per_message=4)(num_workers=2)
    draws = np.concatenate([batch["np"].reshape(-1) for batch in loader])
    assert len(draws) == 64 * 4 and len(np.unique(draws)) == len(draws), "two samples drew the same numbers"


class _Tagged(dataloader.Dataset):
    """(index, 100 characters of text): a batch's text travels inside the message."""

    def __len__(self) -> int:
        return 192 * 1024  # 6 groups of 32 batches: 3 messages to each of 2 workers

    def __getitem__(self, index: int) -> tuple:
        return index, f"{index:>100}"


@pytest.mark.timeout(60, method="thread")  # a deadlock ends the run with every thread's stack
def test_groups_larger_than_the_sockets_buffers_both_ways_do_not_deadlock(no_leaks):
    """32 batches of 1,024 indices are 256 KiB to send, and the text of their batches comes
    back inside the message, 3 MiB: both above a socket's buffer (about 200 KiB). The main
    process once blocked sending the next group while the worker blocked sending one back."""
    dataset = _Tagged()
    loader = DataLoader(dataset, RandomSampler(dataset, batch_size=1024, seed=3), num_workers=2,
                        batches_per_message=32, multiprocessing_context="fork")
    for _ in range(2):  # a new pool each epoch, whose first batches go inside the messages too
        seen, text = zip(*((batch[0], batch[1]) for batch in loader))
        assert np.array_equal(np.sort(np.concatenate(seen)), np.arange(len(dataset)))
        assert all(int(t) == i for ts, ids in zip(text, seen) for t, i in zip(ts, ids.tolist()))
