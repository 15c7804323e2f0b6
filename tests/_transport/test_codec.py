"""The codec: a nested batch -> small pickle + out-of-band buffers -> the same batch."""

from __future__ import annotations

import pickle

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from dataloader._alloc import use_allocator
from dataloader._transport.arena import BumpAllocator
from dataloader._transport.codec import (
    INLINE_LIMIT,
    InlineBatch,
    SharedBatch,
    decode_inline,
    decode_shared,
    inline,
    pack,
    split,
)
from dataloader._device.structure import leaves
from dataloader._transport.segment import ALIGNMENT
from dataloader.collator import Collator

from ._helpers import LocalWorker, Pair, assert_identical, reaches

STRUCTURED = np.dtype([("a", "<i4"), ("b", "<f8", (2,)), ("c", "?")])
DTYPES = [
    np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64,
    np.float16, np.float32, np.float64, np.complex64, np.complex128,
    np.dtype(">i4"), np.dtype(">f8"), np.dtype("U3"), np.dtype("S4"),
    np.dtype("M8[ns]"), np.dtype("m8[s]"), STRUCTURED,
]


def _layout(array: np.ndarray, how: str) -> np.ndarray:
    if how == "fortran":
        return np.asfortranarray(array)
    if how == "transposed":
        return array.T
    if how == "strided" and array.ndim:
        return array[..., ::2]
    return array


@st.composite
def small_arrays(draw):
    dtype = draw(st.sampled_from(DTYPES))
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5))
    array = draw(hnp.arrays(dtype, shape))
    return _layout(array, draw(st.sampled_from(["c", "fortran", "transposed", "strided"])))


@st.composite
def large_arrays(draw, layouts=("c", "fortran", "transposed", "strided"), min_bytes=0):
    """Arrays big enough (up to 240 KiB) to cross the inline limit alone or together."""
    dtype = np.dtype(draw(st.sampled_from([np.uint8, np.float32, np.float64, np.complex128, np.bool_])))
    top = 240 * 1024 // dtype.itemsize
    low = -(-min_bytes // dtype.itemsize)
    count = draw(st.one_of(st.integers(low, max(low, 64)), st.integers(max(low, top // 5), top)))
    array = np.arange(count).astype(dtype)
    if count >= 6 and draw(st.booleans()):
        array = array[: count - count % 6].reshape(-1, 6)
    return _layout(array, draw(st.sampled_from(layouts)))


def _arrow(values: list, kind: str):
    array = pa.array(values, type=pa.int64())
    if kind == "array":
        return array
    if kind == "sliced":
        return array.slice(1) if len(array) else array
    if kind == "strings":
        return pa.array([None if v is None else str(v) * 3 for v in values])
    if kind == "record_batch":
        return pa.record_batch({"x": array, "y": pa.array([float(i) for i in range(len(values))])})
    return pa.Table.from_batches([pa.record_batch({"x": array})] * 2)  # two chunks


arrow_leaves = st.builds(
    _arrow,
    st.lists(st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)), max_size=20),
    st.sampled_from(["array", "sliced", "strings", "record_batch", "table"]),
)
scalar_leaves = st.one_of(st.text(max_size=8), st.integers(), st.floats(allow_nan=False), st.none())


def _nest(children):
    return st.one_of(
        st.lists(children, max_size=4),
        st.tuples(children, children),
        st.dictionaries(st.text(max_size=4), children, max_size=4),
        st.builds(Pair, children, children),
    )


batches = st.recursive(
    st.one_of(small_arrays(), large_arrays(), arrow_leaves, scalar_leaves), _nest, max_leaves=8
)


# A contiguous array of more than the inline limit beside a random batch: always the shared path.
big_batches = st.builds(
    lambda big, rest: {"big": big, "rest": rest},
    large_arrays(layouts=("c", "fortran", "transposed"), min_bytes=INLINE_LIMIT + 1),
    batches,
)


def _out_of_band(array: np.ndarray) -> bool:
    """Whether NumPy pickles ``array`` with an out-of-band buffer (protocol 5)."""
    contiguous = array.flags.c_contiguous or array.flags.f_contiguous
    return contiguous and array.dtype.kind not in "OMm" and array.dtype.itemsize > 0


def _check_views(original, decoded, segment_view) -> None:
    """Arrays sent out-of-band are writable views of the segment; the rest are writable copies."""
    for before, after in zip(leaves(original), leaves(decoded)):
        if not isinstance(before, np.ndarray):
            continue
        assert after.flags.writeable, "a decoded array is read-only"
        assert reaches(after, segment_view) == _out_of_band(before), (
            f"{before.dtype}{before.shape}: view of the segment: {reaches(after, segment_view)}"
        )


def _decode_checked(batch, payload: SharedBatch, worker: LocalWorker) -> None:
    """Decode ``payload`` from its segment: identical to ``batch``, out-of-band arrays as views."""
    view = worker.view(payload.segment_id)
    decoded = decode_shared(payload, view)
    assert_identical(batch, decoded)
    _check_views(batch, decoded, view)


# -- round trips -------------------------------------------------------------------


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(batches)
def test_inline_round_trip(batch):
    meta, raws = split(batch)
    payload = inline(meta, raws)
    decoded = decode_inline(payload)
    assert_identical(batch, decoded)
    for before, after in zip(leaves(batch), leaves(decoded)):
        if isinstance(before, np.ndarray):
            assert after.flags.writeable


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.one_of(batches, big_batches))
def test_pack_round_trip_without_allocator(batch):
    worker = LocalWorker(64 * 2**20)
    try:
        meta, raws = split(batch)
        payload = pack(meta, raws, worker.pool, None)
        total = sum(-(-r.nbytes // ALIGNMENT) * ALIGNMENT for r in raws)
        event("shared" if raws and total > INLINE_LIMIT else "inline")
        if not raws or total <= INLINE_LIMIT:
            assert isinstance(payload, InlineBatch), f"{total} bytes should travel inline"
            decoded = decode_inline(payload)
        else:
            assert isinstance(payload, SharedBatch), f"{total} bytes should travel in shared memory"
            assert payload.nbytes == sum(r.nbytes for r in raws)
            segment_view = worker.view(payload.segment_id)
            decoded = decode_shared(payload, segment_view)
            _check_views(batch, decoded, segment_view)
        assert_identical(batch, decoded)
    finally:
        worker.close()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.one_of(batches, big_batches))
def test_pack_round_trip_with_allocator(batch):
    worker = LocalWorker(64 * 2**20)
    try:
        segment = worker.pool.acquire(1)
        meta, raws = split(batch)
        payload = pack(meta, raws, worker.pool, BumpAllocator(segment))
        if not raws:
            assert isinstance(payload, InlineBatch) and payload.buffers == ()
            assert segment.free, "the unused arena segment was not given back"
            assert_identical(batch, decode_inline(payload))
            return
        assert isinstance(payload, SharedBatch)
        for offset, nbytes in payload.layout:
            assert offset % ALIGNMENT == 0
            assert offset + nbytes <= worker.segments[payload.segment_id].size
        event("arena outgrown" if payload.segment_id != segment.id else "arena kept")
        if payload.segment_id != segment.id:
            assert segment.free, "the outgrown arena segment was not given back"
        _decode_checked(batch, payload, worker)
    finally:
        worker.close()


# -- specific cases ---------------------------------------------------------------


def test_structured_and_odd_dtypes_round_trip_through_a_segment():
    batch = {
        "structured": np.array([(1, (2.5, -1.0), True), (3, (0.0, 7.0), False)], dtype=STRUCTURED),
        "half": np.linspace(-1, 1, 7, dtype=np.float16),
        "complex": np.array([1 + 2j, np.nan + 1j], dtype=np.complex64),
        "flags": np.array([True, False, True]),
        "scalar": np.array(3.5),
        "empty": np.zeros((0, 4), np.int32),
        "big_endian": np.arange(5, dtype=">u2"),
        "fortran": np.asfortranarray(np.arange(12, dtype=np.int64).reshape(3, 4)),
        "strided": np.arange(20, dtype=np.float64)[::3],
        "dates": np.array(["2024-01-01", "NaT"], dtype="M8[D]"),
    }
    worker = LocalWorker(2**20)
    try:
        meta, raws = split(batch)
        payload = pack(meta, raws, worker.pool, BumpAllocator(worker.pool.acquire(1)))
        _decode_checked(batch, payload, worker)
    finally:
        worker.close()


def test_decoded_arrays_are_the_segment_memory():
    batch = {"x": np.arange(100_000, dtype=np.float32), "y": np.asfortranarray(np.ones((200, 300)))}
    worker = LocalWorker(8 * 2**20)
    try:
        meta, raws = split(batch)
        payload = pack(meta, raws, worker.pool, None)
        assert isinstance(payload, SharedBatch)
        # Only metadata travels in the pickle: no array bytes.
        assert len(meta) < 1024, f"{len(meta)} bytes of pickle for metadata"
        view = worker.view(payload.segment_id)
        decoded = decode_shared(payload, view)
        for key, (offset, _) in zip(["x", "y"], payload.layout):
            array = decoded[key]
            assert reaches(array, view)
            assert array.ctypes.data == view.ctypes.data + offset
            array.flat[0] = 42  # writable, and writes land in the segment
            assert np.frombuffer(view, array.dtype, count=1, offset=offset)[0] == 42
    finally:
        worker.close()


def test_arrow_leaves_round_trip_through_a_segment():
    table = pa.table({"x": pa.array(np.arange(40_000)), "s": pa.array([str(i) for i in range(40_000)])})
    batch = {
        "table": table,
        "record_batch": table.to_batches()[0].slice(5, 100),
        "array": pa.array([1.5, None, 3.0]),
        "chunked": pa.chunked_array([[1, 2], [3]]),
        "labels": ["a", "b"],
    }
    worker = LocalWorker(8 * 2**20)
    try:
        meta, raws = split(batch)
        payload = pack(meta, raws, worker.pool, None)
        assert isinstance(payload, SharedBatch)
        assert len(meta) < 4096
        decoded = decode_shared(payload, worker.view(payload.segment_id))
        assert_identical(batch, decoded)
        # Zero copy: the decoded table's data lies inside the segment.
        segment = worker.segments[payload.segment_id]
        address = decoded["table"].column("x").chunk(0).buffers()[1].address
        assert segment.address <= address < segment.address + segment.size
    finally:
        worker.close()


def test_collated_batch_stays_where_the_allocator_wrote_it():
    samples = [{"image": np.full((3, 32, 32), i, np.uint8), "label": i, "name": f"n{i}"} for i in range(16)]
    worker = LocalWorker(8 * 2**20)
    try:
        allocator = BumpAllocator(worker.pool.acquire(256 * 1024))
        with use_allocator(allocator):
            batch = Collator().apply(samples)
        segment = allocator.segment
        meta, raws = split(batch)
        placed = [segment.offset_of(raw) for raw in raws]
        assert all(offset is not None for offset in placed), "the collator wrote outside the arena"
        payload = pack(meta, raws, worker.pool, allocator)
        assert payload.segment_id == segment.id
        assert [offset for offset, _ in payload.layout] == placed, "pack copied what was already in place"
        decoded = decode_shared(payload, worker.view(segment.id))
        assert_identical(batch, decoded)
    finally:
        worker.close()


def test_pack_moves_to_a_bigger_segment_when_the_arena_is_too_small():
    worker = LocalWorker(8 * 2**20)
    try:
        small = worker.pool.acquire(1)
        batch = [np.arange(small.size, dtype=np.uint8), np.arange(10, dtype=np.int64)]
        meta, raws = split(batch)
        payload = pack(meta, raws, worker.pool, BumpAllocator(small))
        assert isinstance(payload, SharedBatch) and payload.segment_id != small.id
        assert small.free
        assert_identical(batch, decode_shared(payload, worker.view(payload.segment_id)))
    finally:
        worker.close()


def test_pack_returns_none_when_the_pool_has_no_room():
    worker = LocalWorker(128 * 1024)
    try:
        batch = np.zeros(200 * 1024, np.uint8)
        meta, raws = split(batch)
        assert pack(meta, raws, worker.pool, None) is None
        assert worker.created == []
    finally:
        worker.close()


@pytest.mark.parametrize("batch", [{"a": "text", "n": 3}, [], np.array(["x"], dtype=object)])
def test_batches_without_buffers_travel_inline(batch):
    worker = LocalWorker(2**20)
    try:
        meta, raws = split(batch)
        assert raws == []
        payload = pack(meta, raws, worker.pool, None)
        assert isinstance(payload, InlineBatch)
        decoded = decode_inline(payload)
        assert pickle.dumps(decoded) == pickle.dumps(batch)
    finally:
        worker.close()
