"""Plain batches travel as a skeleton number plus shapes, and decode to the same batch."""

from __future__ import annotations

import pickle
from collections import OrderedDict

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dataloader import DataLoader, Dataset, SequentialSampler
from dataloader._device.structure import leaves
from dataloader._transport import skeleton as skeleton_module
from dataloader._transport.arena import BumpAllocator
from dataloader._transport.codec import InlineBatch, SharedBatch, decode_inline, decode_shared, inline, pack, split
from dataloader._transport.receiver import Receiver
from dataloader._transport.skeleton import Plain, SkeletonBook, SkeletonNames, as_bytes, flatten

from ..harness import assert_parallel_equals_serial
from ._helpers import LocalWorker, Pair, assert_identical, reaches
from .test_codec import batches, big_batches

_SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


def _round_trip(batch, names: SkeletonNames, book: SkeletonBook, worker: LocalWorker):
    """Split with skeleton names, pack into ``worker``'s pool, decode: (payload, decoded)."""
    meta, raws = split(batch, names)
    payload = pack(meta, raws, worker.pool, None)
    if isinstance(payload, SharedBatch):
        view = worker.view(payload.segment_id)
        decoded = decode_shared(payload, view, book)
        worker.pool.release([payload.segment_id])
        return payload, decoded, view
    return payload, decode_inline(payload, book), None


@_SETTINGS
@given(st.one_of(batches, big_batches))
def test_any_batch_round_trips_with_skeleton_names(batch):
    worker, names, book = LocalWorker(64 * 2**20), SkeletonNames(), SkeletonBook()
    try:
        for attempt in range(2):  # the second time the skeleton is known on both sides
            payload, decoded, view = _round_trip(batch, names, book, worker)
            assert_identical(batch, decoded)
            plain = flatten(batch) is not None
            assert isinstance(payload.meta, Plain) == plain
            if plain:
                assert (payload.meta.skeleton is None) == (attempt == 1), "the skeleton is sent once"
            for before, after in zip(leaves(batch), leaves(decoded)):
                if isinstance(before, np.ndarray):
                    assert after.flags.writeable
                    if plain and view is not None:
                        assert reaches(after, view), "a plain batch's array is not a view of the segment"
    finally:
        worker.close()


def test_batches_of_other_lengths_share_one_skeleton():
    names, book = SkeletonNames(), SkeletonBook()
    numbers = set()
    for length in (3, 7, 0, 5):
        batch = {"tokens": np.arange(length * 4, dtype=np.int32).reshape(length, 4), "mask": np.ones(length, bool)}
        meta, raws = split(batch, names)
        numbers.add(meta.number)
        assert_identical(batch, decode_inline(inline(meta, raws), book))
    assert numbers == {0}


@pytest.mark.parametrize(
    "batch",
    [
        (np.zeros(3), 5),  # a number
        [np.zeros(3), "name"],  # a string
        {"x": np.asfortranarray(np.ones((3, 4)))},  # not C-contiguous
        {"x": np.arange(10)[::2]},  # strided
        {"x": np.array([1, "a"], dtype=object)},  # object dtype
        OrderedDict(x=np.zeros(2)),  # a dict subclass
        {("a", 1): np.zeros(2)},  # a key that is not a str, int or bytes
        {"t": pa.array([1, 2])},  # Arrow data
        np.zeros(3).view(np.recarray),  # an ndarray subclass
    ],
    ids=["number", "string", "fortran", "strided", "object", "ordereddict", "tuple-key", "arrow", "subclass"],
)
def test_batches_a_skeleton_cannot_describe_are_pickled(batch):
    assert flatten(batch) is None
    meta, raws = split(batch, SkeletonNames())
    assert isinstance(meta, bytes)
    # Compared as pickled once more: NumPy >= 2.5 pickles a strided array otherwise than the
    # contiguous copy that arrives, which is the same value.
    assert pickle.dumps(decode_inline(inline(meta, raws))) == pickle.dumps(pickle.loads(pickle.dumps(batch)))


def test_namedtuples_nested_containers_and_odd_dtypes_are_plain():
    batch = Pair(
        {"a": [np.zeros((2, 0)), np.array(3.5)], 7: np.array(["2024-01-01"], "M8[D]")},
        (np.arange(4, dtype=">u2"), np.zeros(2, [("a", "<i4"), ("b", "?")]), np.array([b"xy"], "S2")),
    )
    names, book = SkeletonNames(), SkeletonBook()
    meta, raws = split(batch, names)
    assert isinstance(meta, Plain) and meta.number == 0
    # The skeleton travels pickled, inside the message, the first time.
    meta = pickle.loads(pickle.dumps(meta, protocol=5))
    decoded = decode_inline(inline(meta, raws), book)
    assert type(decoded) is Pair
    assert_identical(batch, decoded)


def test_as_bytes_views_every_byte_of_any_contiguous_array():
    for array in (np.zeros((), "M8[ns]"), np.zeros((0, 3)), np.zeros(2, [("a", "<i4"), ("b", "?")])):
        view = as_bytes(array)
        assert view.nbytes == array.nbytes and view.format == "B"


def test_past_the_cap_each_batch_carries_its_own_skeleton(monkeypatch):
    monkeypatch.setattr(skeleton_module, "MAX_NAMED", 2)
    names, book = SkeletonNames(), SkeletonBook()
    for rank, dtype in enumerate(["u1", "i2", "i4", "f4", "f8"], 1):  # five skeletons: one per dtype
        batch = [np.zeros(3, dtype)]
        for attempt in range(2):
            meta, raws = split(batch, names)
            assert (meta.skeleton is not None) == (rank > 2 or attempt == 0)
            assert_identical(batch, decode_inline(inline(meta, raws), book))
    assert len(book._skeletons) == 2, "the main process remembered skeletons past the cap"


def test_a_discarded_batch_still_teaches_the_receiver_its_skeleton():
    receiver = Receiver()
    worker = LocalWorker(8 * 2**20, receiver)
    names = SkeletonNames()
    try:
        batch = (np.arange(100_000, dtype=np.float32), np.arange(3))
        first = pack(*split(batch, names), worker.pool, BumpAllocator(worker.pool.acquire(1)))
        assert isinstance(first, SharedBatch) and first.meta.skeleton is not None
        receiver.discard(0, first)  # a stale epoch's batch: never decoded
        worker.pool.release([first.segment_id])
        second = pack(*split(batch, names), worker.pool, None)
        assert second.meta.skeleton is None
        assert_identical(batch, receiver.decode(0, second))
        inline_batch = pack(*split((np.arange(3),), names), worker.pool, None)
        assert isinstance(inline_batch, InlineBatch)
        receiver.discard(0, inline_batch)
        again = pack(*split((np.arange(3),), names), worker.pool, None)
        assert_identical((np.arange(3),), receiver.decode(0, again))
    finally:
        receiver.close()
        worker.close()


def test_skeletons_interleaved_keep_their_numbers():
    names, book = SkeletonNames(), SkeletonBook()
    shapes = {"a": (np.zeros(2, "f4"),), "b": {"x": np.zeros(3, "i8")}, "c": [np.zeros((2, 2), "u1")]}
    seen: dict[str, int] = {}
    for key in "abacbca":
        first_time = key not in seen
        meta, raws = split(shapes[key], names)
        assert seen.setdefault(key, meta.number) == meta.number
        assert (meta.skeleton is not None) == first_time
        assert_identical(shapes[key], decode_inline(inline(meta, raws), book))
    assert sorted(seen.values()) == [0, 1, 2]


class _ShapeShifter(Dataset):
    """Batch ``k`` of 4 samples: float32 images for even k, a dict of float64 and int8 for odd k,
    a string field every third batch (that one is pickled); lengths vary with k."""

    def __len__(self) -> int:
        return 48

    def __getitem__(self, index: int):
        batch = index // 4
        if batch % 3 == 2:
            return np.full(3, index, np.float32), f"s{index}"
        if batch % 2:
            return {"x": np.full(batch + 1, index, np.float64), "y": np.int8(index % 100)}
        return np.full((2, batch + 1), index, np.float32)


def test_batches_of_changing_structure_load_alike_with_workers(no_leaks):
    dataset = _ShapeShifter()

    def make_loader(num_workers: int, **kwargs):
        return DataLoader(dataset, SequentialSampler(dataset, batch_size=4), num_workers=num_workers, **kwargs)

    batches = assert_parallel_equals_serial(make_loader, (1, 2), persistent_workers=True)
    assert {type(b).__name__ for b in batches} == {"ndarray", "dict", "tuple"}
