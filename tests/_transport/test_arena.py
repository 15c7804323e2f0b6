"""The worker's side: the bump allocator and the budgeted pool of reusable segments."""

from __future__ import annotations

import errno
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from dataloader._transport import arena
from dataloader._transport.arena import TRIM_WINDOW, BumpAllocator, segment_size
from dataloader.errors import SharedMemoryError
from dataloader._transport.segment import ALIGNMENT, align

from ._helpers import LocalWorker, reaches

KiB = 1024
MiB = 1024 * KiB


@pytest.fixture
def worker():
    local = LocalWorker(64 * MiB)
    yield local
    local.close()


def _in_segment(array: np.ndarray, segment) -> bool:
    return segment.address <= array.ctypes.data < segment.address + segment.size


# -- BumpAllocator ----------------------------------------------------------------


def test_allocations_are_aligned_consecutive_views_of_the_segment(worker):
    segment = worker.pool.acquire(1)
    allocate = BumpAllocator(segment)
    arrays = [allocate(shape, np.dtype(dtype)) for shape, dtype in
              [((3,), np.uint8), ((5, 7), np.float32), ((1,), np.float64), ((2, 2, 2), np.int16), ((), np.int64)]]
    starts = [a.ctypes.data - segment.address for a in arrays]
    assert all(start % ALIGNMENT == 0 for start in starts), starts
    assert starts == sorted(starts)
    for (a, start), following in zip(zip(arrays, starts), starts[1:]):
        assert start + a.nbytes <= following, "allocations overlap"
    assert allocate.used == starts[-1] + arrays[-1].nbytes
    for a in arrays:
        assert a.flags.c_contiguous and a.flags.writeable
        a.fill(7)
        view = np.frombuffer(segment.buffer, np.uint8, count=a.nbytes, offset=a.ctypes.data - segment.address)
        assert (view == np.frombuffer(a.tobytes(), np.uint8)).all(), "the array is not the segment's memory"
    assert arrays[1].shape == (5, 7) and arrays[1].dtype == np.float32


def test_full_segment_falls_back_to_private_memory(worker):
    segment = worker.pool.acquire(1)
    allocate = BumpAllocator(segment)
    most = allocate((segment.size - 100,), np.dtype(np.uint8))
    assert _in_segment(most, segment)
    used = allocate.used
    spill = allocate((200,), np.dtype(np.uint8))
    assert not _in_segment(spill, segment)
    assert spill.shape == (200,) and spill.flags.writeable
    assert allocate.used == used, "a failed allocation moved the bump pointer"
    # What still fits (after alignment) still comes from the segment.
    rest = segment.size - align(used)
    if rest > 0:
        assert _in_segment(allocate((rest,), np.dtype(np.uint8)), segment)


def test_empty_and_object_arrays_come_from_private_memory(worker):
    segment = worker.pool.acquire(1)
    allocate = BumpAllocator(segment)
    empty = allocate((0, 3), np.dtype(np.float64))
    objects = allocate((4,), np.dtype(object))
    assert empty.shape == (0, 3) and objects.shape == (4,) and objects.dtype == object
    assert not reaches(objects, segment.buffer)
    assert allocate.used == 0


def _memory_of(segment) -> int:
    return os.fstat(segment.fd).st_blocks * 512


def test_only_the_bytes_a_batch_needs_take_memory_until_a_bigger_batch_comes(worker):
    need = 3 * MiB + 5
    segment = worker.pool.acquire(need)
    assert segment.size > need, "the segment has headroom for bigger batches"
    assert segment.backed == need
    assert need <= _memory_of(segment) < need + 64 * KiB, "the headroom took memory"
    allocate = BumpAllocator(segment)
    allocate((need,), np.dtype(np.uint8))
    grown = allocate((512 * KiB,), np.dtype(np.uint8))
    assert _in_segment(grown, segment)
    assert segment.backed == align(need) + 512 * KiB and _memory_of(segment) >= segment.backed
    worker.pool.release([segment.id])
    assert worker.pool.acquire(segment.size) is segment and segment.backed == segment.size


def test_no_memory_for_a_bigger_batch_is_a_clear_error(worker, monkeypatch):
    segment = worker.pool.acquire(MiB)
    monkeypatch.setattr(os, "posix_fallocate", lambda *args: (_ for _ in ()).throw(OSError(errno.ENOSPC, "full")))
    with pytest.raises(SharedMemoryError, match="cannot reserve 1.0 MiB of shared memory for a batch"):
        BumpAllocator(segment)((2 * MiB,), np.dtype(np.uint8))


def test_a_lazy_allocator_takes_its_segment_at_the_first_real_allocation(worker):
    calls = []

    def acquire():
        calls.append(1)
        return worker.pool.acquire(1)

    allocate = BumpAllocator(acquire=acquire)
    allocate((0, 3), np.dtype(np.float32))
    allocate((2,), np.dtype(object))
    assert calls == [] and allocate.segment is None, "nothing to place yet: no segment taken"
    first = allocate((5,), np.dtype(np.float64))
    second = allocate((3,), np.dtype(np.uint8))
    assert calls == [1], "the segment is taken once"
    assert _in_segment(first, allocate.segment) and _in_segment(second, allocate.segment)


def test_a_lazy_allocator_without_room_hands_out_private_memory():
    allocate = BumpAllocator(acquire=lambda: None)
    array = allocate((4, 4), np.dtype(np.int32))
    assert allocate.segment is None and allocate.used == 0
    assert array.shape == (4, 4) and array.flags.writeable and array.flags.owndata


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(
    st.lists(st.integers(0, 40), max_size=3).map(tuple),
    st.sampled_from([np.bool_, np.uint8, np.int16, np.float32, np.float64, np.complex128]),
), max_size=30))
def test_allocations_never_overlap_and_spill_only_when_full(requests):
    local = LocalWorker(64 * MiB)
    try:
        segment = local.pool.acquire(1)
        allocate = BumpAllocator(segment)
        taken = []
        for shape, dtype in requests:
            dtype = np.dtype(dtype)
            nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
            before = allocate.used
            array = allocate(shape, dtype)
            assert array.shape == shape and array.dtype == dtype
            fits = nbytes > 0 and align(before) + nbytes <= segment.size
            assert _in_segment(array, segment) == fits
            if fits:
                start = array.ctypes.data - segment.address
                assert start == align(before)
                assert all(start >= end or start + nbytes <= begin for begin, end in taken)
                taken.append((start, start + nbytes))
    finally:
        local.close()


# -- segment sizes ----------------------------------------------------------------


@given(st.integers(1, 512 * MiB))
def test_segment_size_has_room_and_round_steps(need):
    size = segment_size(need)
    assert size >= need
    assert size % (64 * KiB) == 0
    assert size <= max(64 * KiB, need * 1.25 + MiB)


# -- SegmentPool ------------------------------------------------------------------


def test_acquire_creates_then_reuses_segments(worker):
    first = worker.pool.acquire(100 * KiB)
    assert first.size >= 100 * KiB and not first.free
    assert worker.created == [first.id]
    second = worker.pool.acquire(100 * KiB)
    assert second is not first, "a lent segment was handed out again"
    worker.pool.release([first.id])
    assert first.free
    again = worker.pool.acquire(50 * KiB)
    assert again is first, "a free segment that fits was not reused"
    assert worker.created == [first.id, second.id], "reuse created a segment"
    worker.pool.give_back(again)
    assert again.free


def test_acquire_picks_the_smallest_free_segment_that_fits(worker):
    big, small = worker.pool.acquire(2 * MiB), worker.pool.acquire(100 * KiB)
    worker.pool.release([big.id, small.id])
    assert worker.pool.acquire(90 * KiB) is small
    assert worker.pool.acquire(90 * KiB) is big


def test_budget_caps_segments_and_release_frees_room():
    local = LocalWorker(1 * MiB)
    try:
        lent = []
        while (segment := local.pool.acquire(200 * KiB)) is not None:
            lent.append(segment)
            assert local.pool.reserved <= local.pool.budget
        assert lent, "not even one segment fits the budget"
        assert local.pool.reserved + segment_size(200 * KiB) > local.pool.budget
        assert local.pool.acquire(200 * KiB) is None
        local.pool.release([lent[0].id])
        assert local.pool.acquire(200 * KiB) is lent[0]
        assert local.retired == []
    finally:
        local.close()


def test_need_beyond_the_budget_is_refused_without_retiring_anything():
    local = LocalWorker(1 * MiB)
    try:
        segment = local.pool.acquire(1)
        local.pool.give_back(segment)
        assert local.pool.acquire(2 * MiB) is None
        assert local.retired == [] and local.pool.reserved == segment.size
    finally:
        local.close()


def test_outgrown_free_segments_are_retired_to_make_room():
    local = LocalWorker(1 * MiB)
    try:
        small = [local.pool.acquire(100 * KiB) for _ in range(4)]  # 4 x 128 KiB
        local.pool.release([s.id for s in small[:3]])
        # 896 KiB needs three of the free ones gone; the lent one stays.
        large = local.pool.acquire(700 * KiB)
        assert large is not None and large.size >= 700 * KiB
        assert local.pool.reserved <= local.pool.budget
        assert sorted(local.retired) == sorted(s.id for s in small[:3])
        assert small[3].id not in local.retired
        assert set(local.segments) == {small[3].id, large.id}
        assert local.created[-1] == large.id
    finally:
        local.close()


def test_lent_segments_are_never_retired():
    local = LocalWorker(1 * MiB)
    try:
        lent = [local.pool.acquire(100 * KiB) for _ in range(4)]
        assert local.pool.acquire(700 * KiB) is None
        assert local.retired == []
        assert all(not s.free for s in lent)
    finally:
        local.close()


def test_a_refused_acquire_retires_nothing():
    """Retiring free segments is worth it only when that makes room; else they are kept for reuse."""
    local = LocalWorker(1 * MiB)
    try:
        lent = [local.pool.acquire(100 * KiB) for _ in range(3)]  # 3 x 128 KiB lent
        spare = local.pool.acquire(100 * KiB)
        local.pool.give_back(spare)  # 128 KiB free
        # 700 KiB needs a 896 KiB segment: 384 KiB lent + 896 KiB > 1 MiB whatever is retired.
        assert local.pool.acquire(700 * KiB) is None
        assert local.retired == [], "a free segment was destroyed and still no room was made"
        assert local.pool.acquire(100 * KiB) is spare
        assert all(not s.free for s in lent)
    finally:
        local.close()


def _rotate(pool, lent: list, steps: int, in_flight: int) -> None:
    """A steady state: take a segment, and once ``in_flight`` are lent, free the oldest."""
    for _ in range(steps):
        lent.append(pool.acquire(200 * KiB))
        if len(lent) > in_flight:
            pool.release([lent.pop(0).id])


def test_segments_a_burst_made_are_retired_once_the_burst_is_over(worker):
    burst = [worker.pool.acquire(200 * KiB) for _ in range(10)]  # the user held 10 batches
    worker.pool.release([s.id for s in burst])
    lent: list = []
    _rotate(worker.pool, lent, 2 * TRIM_WINDOW, in_flight=3)
    # Within two windows the pool is back to what the batches needed: at most 4 lent at once
    # (3 held and the one being taken), plus one spare.
    assert len(worker.segments) == 5, sorted(worker.segments)
    assert len(worker.retired) == 5
    assert all(s.id in worker.segments for s in lent), "a lent segment was retired"
    assert worker.created == [s.id for s in burst], "the steady state made new segments"


def test_a_steady_rotation_never_retires_or_recreates_a_segment(worker):
    lent: list = []
    _rotate(worker.pool, lent, 5 * TRIM_WINDOW, in_flight=3)
    assert worker.retired == []
    assert len(worker.created) == 4


def test_a_segment_needed_now_and_then_is_kept(worker):
    """Once a window the worker needs a fifth segment (a slow batch, a late release): it stays."""
    lent: list = []
    for _ in range(6):
        _rotate(worker.pool, lent, TRIM_WINDOW - 2, in_flight=3)
        lent += [worker.pool.acquire(200 * KiB), worker.pool.acquire(200 * KiB)]  # 5 lent at once
        worker.pool.release([lent.pop(0).id, lent.pop(0).id])
    assert worker.retired == [] and len(worker.created) == 5


class PoolMachine(RuleBasedStateMachine):
    """Random acquire / release / give-back: the budget holds and lent segments stay lent,
    with a trim window short enough that trimming happens within a run."""

    def __init__(self) -> None:
        super().__init__()
        self.window = arena.TRIM_WINDOW
        arena.TRIM_WINDOW = 5
        self.local = LocalWorker(2 * MiB)
        self.lent: dict[int, object] = {}

    @rule(need=st.integers(1, 900 * KiB))
    def acquire(self, need):
        retired = list(self.local.retired)
        segment = self.local.pool.acquire(need)
        if segment is None:
            fitting = segment_size(need)
            # Refused only if even retiring every free segment leaves too little room.
            lent_bytes = sum(s.size for s in self.lent.values())
            assert lent_bytes + fitting > self.local.pool.budget
            assert self.local.retired == retired, "a refused acquire retired segments"
            return
        assert segment.id not in self.lent, "a lent segment was handed out again"
        assert segment.size >= need and not segment.free
        self.lent[segment.id] = segment

    @precondition(lambda self: self.lent)
    @rule(data=st.data(), via_release=st.booleans())
    def free_one(self, data, via_release):
        segment_id = data.draw(st.sampled_from(sorted(self.lent)))
        segment = self.lent.pop(segment_id)
        if via_release:
            self.local.pool.release((segment_id,))
        else:
            self.local.pool.give_back(segment)
        assert segment.free

    @invariant()
    def within_budget(self):
        assert self.local.pool.reserved <= self.local.pool.budget
        live = set(self.local.created) - set(self.local.retired)
        assert live == set(self.local.segments)
        assert set(self.lent) <= live, "a lent segment was retired"

    def teardown(self):
        arena.TRIM_WINDOW = self.window
        self.local.close()


PoolMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
test_pool_state_machine = PoolMachine.TestCase
