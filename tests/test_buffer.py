import threading
import time

import pytest

from dataloader.buffer import BufferedIterator, ThreadBuffer, buffer_iterator
from dataloader.errors import ArgumentValueError, LoaderTimeoutError


def test_thread_buffer_yields_everything_in_order_each_pass():
    buffer = ThreadBuffer(range(20), buffer_size=3)
    assert list(buffer) == list(range(20))
    assert list(buffer) == list(range(20))


def test_repeats_hand_each_item_out_n_times():
    assert list(ThreadBuffer([1, 2], repeats=3)) == [1, 1, 1, 2, 2, 2]


def test_the_thread_runs_at_most_buffer_size_ahead():
    produced = []

    def source():
        for i in range(100):
            produced.append(i)
            yield i

    iterator = iter(ThreadBuffer(source(), buffer_size=2))
    assert next(iterator) == 0
    deadline = time.monotonic() + 1
    while len(produced) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)
    # one handed out, two buffered, one more produced and blocked on the full buffer
    assert len(produced) <= 4
    iterator.close()


def test_source_error_reaches_the_consumer_with_its_traceback():
    def source():
        yield 1
        raise KeyError("lost")

    iterator = iter(ThreadBuffer(source()))
    assert next(iterator) == 1
    with pytest.raises(KeyError, match="lost") as caught:
        next(iterator)
    assert "source" in str(caught.traceback[-1].name)
    iterator.close()


def test_timeout_when_the_source_stalls():
    gate = threading.Event()

    def source():
        gate.wait(10)
        yield 1

    iterator = iter(ThreadBuffer(source(), timeout=0.2))
    with pytest.raises(LoaderTimeoutError):
        next(iterator)
    gate.set()
    iterator.close()


def test_an_infinite_timeout_waits_forever_and_a_longer_than_poll_one_is_refused():
    assert list(ThreadBuffer(range(3), timeout=float("inf"))) == [0, 1, 2]  # was an OverflowError
    with pytest.raises(ArgumentValueError, match=r"`timeout` must be at most 2147483 seconds"):
        ThreadBuffer(range(3), timeout=1e13)


def test_close_joins_the_thread_even_while_it_waits_for_room():
    iterator = BufferedIterator(iter(range(1000)), buffer_size=1)
    next(iterator)
    iterator.close()
    assert not iterator._thread.is_alive()


def test_close_calls_on_stuck_for_a_blocked_source():
    gate = threading.Event()

    def source():
        gate.wait(10)
        yield 1

    iterator = BufferedIterator(source(), on_stuck=gate.set)
    iterator.close()
    assert gate.is_set() and not iterator._thread.is_alive()


def test_buffer_iterator_closes_its_thread_when_the_generator_closes():
    before = threading.active_count()
    generator = buffer_iterator(range(10), buffer_size=2)
    assert next(generator) == 0
    generator.close()
    assert threading.active_count() == before


def test_arguments_are_checked():
    with pytest.raises(ArgumentValueError, match="`buffer_size`"):
        ThreadBuffer([], buffer_size=0)
    with pytest.raises(ArgumentValueError, match="`repeats`"):
        ThreadBuffer([], repeats=0)
