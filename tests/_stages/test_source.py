import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataloader._stages.source import timed_stream, map_tasks, stream_tasks
from dataloader.errors import LoaderTimeoutError


def test_map_tasks_number_batches_and_copy_indices():
    tasks = list(map_tasks([[3, 1], [2]], epoch=4))
    assert [(t.epoch, t.index, t.indices, t.samples) for t in tasks] == [(4, 0, [3, 1], None), (4, 1, [2], None)]


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 50), batch_size=st.integers(1, 9))
def test_stream_tasks_group_everything_once_keeping_the_short_tail(n, batch_size):
    tasks = list(stream_tasks(iter(range(n)), batch_size, epoch=0))
    assert [s for t in tasks for s in t.samples] == list(range(n))
    assert all(len(t.samples) == batch_size for t in tasks[:-1])
    assert [t.index for t in tasks] == list(range(len(tasks)))


def test_stream_tasks_stop_reading_after_a_short_batch():
    reads = []

    def stream():
        for i in range(3):
            reads.append(i)
            yield i

    assert len(list(stream_tasks(stream(), 2, 0))) == 2
    assert reads == [0, 1, 2]


def test_timed_stream_passes_samples_then_ends_repeatedly():
    timed = timed_stream(iter([1, 2]), timeout=5)
    assert list(timed) == [1, 2]
    with pytest.raises(StopIteration):
        next(timed)
    timed.close()


def test_timed_stream_times_out_and_closes():
    gate = threading.Event()

    def stuck():
        yield 1
        gate.wait(10)

    timed = timed_stream(stuck(), timeout=0.2)
    assert next(timed) == 1
    with pytest.raises(LoaderTimeoutError, match="no sample within 0.2 s"):
        next(timed)
    gate.set()
    timed.close()
    assert not timed._thread.is_alive()


def test_timed_stream_reraises_the_streams_error():
    def broken():
        yield 1
        raise ValueError("boom")

    timed = timed_stream(broken(), timeout=5)
    assert next(timed) == 1
    with pytest.raises(ValueError, match="boom"):
        next(timed)
    timed.close()
