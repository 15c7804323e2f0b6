"""Protocol messages over a worker's socket: plain pickle, descriptors beside them, EOF at the end."""

from __future__ import annotations

import io
import os
import pickle
import select
import threading
from multiprocessing import Pipe
from multiprocessing.reduction import ForkingPickler

import numpy as np
import pytest

from dataloader._stages.batch import StageTimes
from dataloader._stages.task import BatchTask
from dataloader._transport.codec import InlineBatch, SharedBatch, split
from dataloader._transport.skeleton import SkeletonNames
from dataloader._workers.fd_passing import receive_descriptor, send_descriptor
from dataloader._workers.messages import (
    BatchDone,
    BatchFailed,
    StreamEnded,
    ReleaseSegments,
    Replies,
    RunTask,
    RunTasks,
    SegmentCreated,
    Shutdown,
    WaitingForRoom,
)
from dataloader._workers.remote_error import RemoteError
from dataloader._transport.skeleton import Plain
from dataloader._workers.wire import Wire, _compact, _expand


@pytest.fixture
def wires():
    a, b = Pipe(duplex=True)
    yield Wire(a), Wire(b)
    a.close()
    b.close()


def _skeleton():
    meta, _ = split({"x": np.zeros(2, np.int16)}, SkeletonNames())
    return meta.skeleton


def _messages() -> list:
    meta, _ = split((np.zeros((2, 3), np.float32), np.arange(2)), SkeletonNames())
    times = StageTimes(1.0, 2.0, 3.0, 4.0, 2)
    try:
        raise IndexError("sample 7 is missing")
    except IndexError as error:
        remote = RemoteError.capture(error, 1, 1234, [6, 7], "fetch")
    return [
        RunTask(BatchTask(3, 9, indices=list(range(256))), released=(0, 2)),
        ReleaseSegments((1,)),
        BatchDone(3, 9, SharedBatch(0, meta, ((0, 24), (64, 16))), times, 5.0),
        BatchDone(3, 10, InlineBatch(b"pickled", (bytearray(b"\x01\x02"),)), times, 6.0),
        BatchFailed(3, 11, remote),
        RunTasks((BatchTask(3, 12, indices=[1, 2]), BatchTask(3, 13, indices=[3])), released=(5,)),
        Replies((
            BatchDone(3, 12, InlineBatch(b"pickled", (bytearray(b"\x03"),)), times, 7.0),
            BatchFailed(3, 13, remote),
            StreamEnded(3, 14),
        )),
        WaitingForRoom(100, 200, 300, 4),
        Shutdown(),
    ]


def test_every_kind_of_message_arrives_equal_and_in_order(wires, monkeypatch):
    here, there = wires

    def forking_pickler_used(*args, **kwargs):
        raise AssertionError("the wire pickled with ForkingPickler")

    monkeypatch.setattr(ForkingPickler, "dumps", forking_pickler_used)
    sent = _messages()
    for message in sent:
        here.send(message)
    received = [there.recv() for _ in sent]
    assert received == sent
    assert received[4].error.rebuild().args == ("sample 7 is missing",)
    assert received[6].messages[1].error.rebuild().args == ("sample 7 is missing",)


def test_a_descriptor_passes_between_messages(wires, tmp_path):
    here, there = wires
    path = tmp_path / "segment"
    path.write_bytes(b"shared bytes")
    fd = os.open(path, os.O_RDONLY)
    try:
        here.send(SegmentCreated(0, 12))
        send_descriptor(here, fd)
        here.send(Shutdown())
        assert there.recv() == SegmentCreated(0, 12)
        received = receive_descriptor(there, "worker 0")
        try:
            assert os.pread(received, 12, 0) == b"shared bytes"
        finally:
            os.close(received)
        assert there.recv() == Shutdown()
    finally:
        os.close(fd)


def test_a_closed_peer_ends_in_eof(wires):
    here, there = wires
    here.close()
    with pytest.raises(EOFError):
        there.recv()


def _classes_named(payload: bytes) -> list[str]:
    """The classes a pickle looks up by name on arrival (each lookup and rebuild costs)."""
    found: list[str] = []

    class Recording(pickle.Unpickler):
        def find_class(self, module, name):
            found.append(name)
            return super().find_class(module, name)

    Recording(io.BytesIO(payload)).load()
    return found


def _steady_messages() -> list:
    """What is sent for a batch once the batch's skeleton is known at the far end."""
    names = SkeletonNames()
    batch = (np.zeros((2, 3), np.float32), np.arange(2))
    split(batch, names)
    meta, _ = split(batch, names)
    times = StageTimes(1.0, 2.0, 3.0, 4.0, 2)
    return [
        RunTask(BatchTask(3, 9, indices=list(range(64))), released=(0, 2)),
        RunTask(BatchTask(3, 9, indices=[1])),
        ReleaseSegments((1, 4)),
        BatchDone(3, 9, SharedBatch(0, meta, ((0, 24), (64, 16))), times, 5.0),
        BatchDone(3, 10, InlineBatch(meta, (bytearray(24), bytearray(16))), None, None),
        RunTasks(tuple(BatchTask(3, k, indices=list(range(k, k + 8))) for k in range(4)), released=(7,)),
        Replies(tuple(BatchDone(3, k, InlineBatch(meta, (bytearray(24), bytearray(16))), times, 5.0)
                      for k in range(4))),
    ]


@pytest.mark.parametrize("message", _steady_messages(), ids=lambda m: type(m).__name__)
def test_per_batch_messages_travel_without_classes(message):
    """The messages sent for every batch pickle as built-in values only; the far end rebuilds them."""
    payload = pickle.dumps(_compact(message), protocol=pickle.HIGHEST_PROTOCOL)
    assert _classes_named(payload) == []
    assert _expand(pickle.loads(payload)) == message


@pytest.mark.parametrize(
    "message",
    [
        RunTask(BatchTask(0, 1, samples=[b"raw", 2])),  # a stream sample read by the main process
        RunTask(BatchTask(0, 2, indices=[4, 5], chunk=(1, 2, 0))),  # part of a split batch
        RunTask(BatchTask(0, 3)),  # parallel_stream: the worker reads its own shard
        RunTasks((BatchTask(0, 6, samples=[1]), BatchTask(0, 7, samples=[2]))),  # stream samples
        RunTasks((BatchTask(0, 8, indices=[1]), BatchTask(1, 0, indices=[2]))),  # two epochs
        BatchDone(0, 4, SharedBatch(1, b"pickled meta", ((0, 8),)), None, None),
        BatchDone(0, 5, InlineBatch(Plain(0, ((2,),), _skeleton()), (bytearray(16),)), None, 1.0),
    ],
    ids=["samples", "chunk", "shard", "grouped-samples", "grouped-epochs", "pickled-meta", "skeleton-in-full"],
)
def test_unusual_tasks_and_batches_arrive_equal(wires, message):
    here, there = wires
    here.send(message)
    assert there.recv() == message


def test_our_samplers_index_arrays_travel_as_bytes_and_arrive_as_int64_arrays():
    indices = np.arange(5, 261, dtype=np.int64)
    for message in (RunTask(BatchTask(0, 1, indices=indices), released=(2,)),
                    RunTasks((BatchTask(0, 1, indices=indices), BatchTask(0, 2, indices=indices[:3])))):
        payload = pickle.dumps(_compact(message), protocol=pickle.HIGHEST_PROTOCOL)
        assert _classes_named(payload) == []
        assert len(payload) < indices.nbytes + 200  # 8 bytes an index, not a pickled int each
        tasks = getattr(_expand(pickle.loads(payload)), "tasks", None) or (_expand(pickle.loads(payload)).task,)
        sent = getattr(message, "tasks", None) or (message.task,)
        for got, task in zip(tasks, sent):
            assert (got.epoch, got.index) == (task.epoch, task.index)
            assert got.indices.dtype == np.int64 and got.indices.tolist() == task.indices.tolist()


def test_the_main_end_never_blocks_and_sends_in_order_once_the_other_end_reads():
    a, b = Pipe(duplex=True)
    main, worker = Wire(a, never_block=True), Wire(b)
    try:
        big = RunTasks(tuple(BatchTask(0, i, indices=np.arange(4096)) for i in range(32)), released=(1,))
        for _ in range(3):  # 3 MiB: many times what a socket's buffer holds
            main.send(big)
        main.send(ReleaseSegments((7,)))  # small, behind the big ones
        assert main.unsent and not main.flush()  # nothing read yet: it all waits here
        received: list = []
        reader = threading.Thread(target=lambda: received.extend(worker.recv() for _ in range(4)))
        reader.start()
        while not main.flush():
            select.select([], [a], [], 5.0)  # room in the socket: write more
        reader.join(5.0)
        assert not main.unsent and [type(m) for m in received] == [RunTasks] * 3 + [ReleaseSegments]
        assert [t.indices.tolist() for t in received[2].tasks] == [list(range(4096))] * 32
        assert received[3].segment_ids == (7,)
    finally:
        main.close()
        worker.close()


@pytest.mark.parametrize("size", [10, 16384, 16385, 300_000])
def test_the_main_end_frames_messages_as_send_bytes_does(size):
    a, b = Pipe(duplex=True)
    main = Wire(a, never_block=True)
    try:
        payload = ReleaseSegments(tuple(range(size // 8)))
        main.send(payload)
        got = []
        while not got:
            main.flush()
            if b.poll(0.1):
                got.append(pickle.loads(b.recv_bytes()))
        assert _expand(got[0]) == payload and main.flush()
    finally:
        main.close()
        b.close()


def test_closing_the_main_end_closes_its_descriptors():
    before = len(os.listdir("/proc/self/fd"))
    a, b = Pipe(duplex=True)
    Wire(a, never_block=True).close()
    b.close()
    assert len(os.listdir("/proc/self/fd")) == before
