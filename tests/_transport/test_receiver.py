"""The main process's side: batches lent out of segments until the user drops every view."""

from __future__ import annotations

import gc
import os
import select
import threading

import numpy as np
import pyarrow as pa
import pytest

from dataloader._transport.codec import SharedBatch, pack, split
from dataloader._transport.receiver import Receiver

from ._helpers import LocalWorker, assert_identical

MiB = 2**20


@pytest.fixture
def link(no_leaks):
    """A receiver and a worker (id 3) whose segments it maps; both closed at the end."""
    receiver = Receiver()
    worker = LocalWorker(16 * MiB, receiver, worker_id=3)
    yield receiver, worker
    worker.close()
    receiver.close()


def _send(worker: LocalWorker, batch) -> SharedBatch:
    meta, raws = split(batch)
    payload = pack(meta, raws, worker.pool, None)
    assert isinstance(payload, SharedBatch)
    return payload


def _readable(fd: int) -> bool:
    return bool(select.select([fd], [], [], 0)[0])


def _batch(seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {
        "image": rng.integers(0, 256, (8, 3, 64, 64), dtype=np.uint8),
        "label": np.arange(8, dtype=np.int64) + seed,
        "names": [f"n{i}" for i in range(8)],
    }


def test_decoded_batch_matches_and_views_the_receivers_mapping(link):
    receiver, worker = link
    original = _batch()
    payload = _send(worker, original)
    batch = receiver.decode(3, payload)
    assert_identical(original, batch)
    assert batch["image"].flags.writeable
    # The receiver maps the segment itself: a write there shows in the worker's mapping.
    batch["label"][0] = -5
    offset = payload.layout[1][0]
    assert np.frombuffer(worker.segments[payload.segment_id].buffer, np.int64, count=1, offset=offset)[0] == -5


def test_segment_is_lent_until_the_last_view_is_dropped(link):
    receiver, worker = link
    payload = _send(worker, _batch())
    batch = receiver.decode(3, payload)
    assert receiver.lent == 1
    assert receiver.drain() == {}
    assert not _readable(receiver.wakeup_fd)
    image = batch["image"]
    del batch
    gc.collect()
    assert receiver.drain() == {}, "released while an array of the batch is alive"
    del image
    assert receiver.drain() == {3: [payload.segment_id]}
    assert receiver.lent == 0
    assert receiver.drain() == {}, "a segment was released twice"


def test_a_view_derived_from_a_slice_keeps_the_segment_lent(link):
    receiver, worker = link
    payload = _send(worker, _batch())
    batch = receiver.decode(3, payload)
    part = batch["image"][2:4, 1]
    derived = part[:, ::2, 5].T
    assert np.shares_memory(derived, batch["image"]), "the test needs a view, not a copy"
    del batch, part
    gc.collect()
    assert receiver.drain() == {}, "released while a derived view is alive"
    assert not _readable(receiver.wakeup_fd)
    del derived
    assert receiver.drain() == {3: [payload.segment_id]}


def test_a_memoryview_of_an_array_keeps_the_segment_lent(link):
    receiver, worker = link
    payload = _send(worker, _batch())
    batch = receiver.decode(3, payload)
    raw = memoryview(batch["image"])
    del batch
    gc.collect()
    assert receiver.drain() == {}
    raw.release()
    del raw
    assert receiver.drain() == {3: [payload.segment_id]}


def test_arrow_data_keeps_the_segment_lent(link):
    receiver, worker = link
    table = pa.table({"x": np.arange(50_000), "y": np.ones(50_000)})
    payload = _send(worker, {"table": table})
    batch = receiver.decode(3, payload)
    column = batch["table"].column("y")
    assert column.equals(table.column("y"))
    del batch
    gc.collect()
    assert receiver.drain() == {}, "released while Arrow data from the segment is alive"
    del column
    gc.collect()
    assert receiver.drain() == {3: [payload.segment_id]}


def test_batches_are_released_one_by_one(link):
    receiver, worker = link
    first_payload, second_payload = _send(worker, _batch(1)), _send(worker, _batch(2))
    assert first_payload.segment_id != second_payload.segment_id
    first, second = receiver.decode(3, first_payload), receiver.decode(3, second_payload)
    assert receiver.lent == 2
    del second
    assert receiver.drain() == {3: [second_payload.segment_id]}
    assert_identical(_batch(1), first)
    del first
    assert receiver.drain() == {3: [first_payload.segment_id]}


def test_a_drop_while_the_executor_is_awake_costs_no_wake_up(link):
    """The executor reads the queue before it sleeps: a drop meanwhile needs no system call."""
    receiver, worker = link
    batch = receiver.decode(3, _send(worker, _batch()))
    del batch
    assert not _readable(receiver.wakeup_fd), "a drop wrote to the pipe although nobody sleeps on it"
    assert receiver.drain() != {}


def test_a_drop_while_the_executor_sleeps_wakes_it(link):
    receiver, worker = link
    payload = _send(worker, _batch())
    batch = receiver.decode(3, payload)
    receiver.sleeping = True
    del batch
    assert _readable(receiver.wakeup_fd), "dropping the batch did not wake the sleeping executor"
    receiver.sleeping = False
    assert receiver.drain() == {3: [payload.segment_id]}
    assert not _readable(receiver.wakeup_fd), "drain() left the wake-up pipe readable"


def test_release_from_another_thread_wakes_the_waiter(link):
    receiver, worker = link
    payload = _send(worker, _batch())
    holder = [receiver.decode(3, payload)]
    receiver.sleeping = True  # as the executor sets it around its poll
    thread = threading.Thread(target=holder.clear)
    thread.start()
    thread.join()
    assert select.select([receiver.wakeup_fd], [], [], 5)[0], "no wake-up after a drop in another thread"
    receiver.sleeping = False
    assert receiver.drain() == {3: [payload.segment_id]}


def test_a_drain_between_a_drop_and_its_wake_up_byte_leaves_no_byte_behind(link, monkeypatch):
    """A drop in another thread can be interrupted just before it writes its byte, and the
    executor can drain the queue right then; the byte must still be read by the next drain,
    or the pipe stays readable and every later wait returns at once (a busy loop)."""
    receiver, worker = link
    payload = _send(worker, _batch())
    batch = receiver.decode(3, payload)
    write = os.write

    def drain_first(fd, data):  # the executor runs between the drop's start and its write
        drained.append(receiver.drain())
        return write(fd, data)

    drained: list = []
    monkeypatch.setattr(os, "write", drain_first)
    receiver.sleeping = True
    del batch
    monkeypatch.setattr(os, "write", write)
    receiver.sleeping = False
    assert drained == [{3: [payload.segment_id]}]
    receiver.drain()
    assert not _readable(receiver.wakeup_fd), "the drop's byte was never read: the pipe stays readable"


def test_discard_gives_a_batch_back_at_once(link):
    receiver, worker = link
    payload = _send(worker, _batch())
    receiver.discard(3, payload)
    assert receiver.lent == 0
    assert receiver.drain() == {3: [payload.segment_id]}


def test_inline_batches_lend_nothing(link):
    receiver, worker = link
    meta, raws = split({"x": np.arange(10)})
    payload = pack(meta, raws, worker.pool, None)
    batch = receiver.decode(3, payload)
    assert receiver.lent == 0 and worker.created == []
    assert list(batch["x"]) == list(range(10))


def test_views_outlive_close_and_removal(link):
    receiver, worker = link
    payload = _send(worker, _batch())
    batch = receiver.decode(3, payload)
    receiver.remove_segment(3, payload.segment_id)
    receiver.close()
    receiver.close()  # idempotent
    assert_identical(_batch(), batch)  # the mapping lives on with its views
    del batch  # dropping views after close must not raise or write to closed pipes
    gc.collect()
