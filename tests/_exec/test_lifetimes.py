"""Who keeps an epoch's workers alive, what a second ``iter(loader)`` does to the first, and what a
``close()`` from another thread does to a ``next()`` that waits.

- A loader dropped right after ``iter()`` (``for batch in DataLoader(...)``) keeps serving that
  epoch: the epoch holds what it runs on. A loader dropped with no epoch open stops its workers.
- With persistent workers or ``epoch_size``, epochs share the workers or the feed: a newer
  ``iter(loader)`` supersedes an open epoch, whose next ``next()`` raises ``DataLoaderError``
  (never a silent, short epoch). Without them, epochs are independent and both are served.
- ``close()`` from another thread wakes a ``next()`` that waits within a second, in every mode,
  with a ``DataLoaderError`` that says so.
"""

from __future__ import annotations

import gc
import threading
import time

import psutil
import pytest

from dataloader import DataLoader, DataLoaderError, SequentialSampler, StreamSampler
from tests._workers._fixtures import Numbers
from tests.harness import assert_processes_stop, notice_within

from ._fixtures import GatedDataset, RangeStream, ShardedStream

SUPERSEDED = "superseded by a newer iter"
CLOSED_ELSEWHERE = "closed from another thread"
LOADER_CLOSED = "loader.close()"


def _numbers(n: int = 40, **kwargs) -> DataLoader:
    dataset = Numbers(n)
    return DataLoader(dataset, SequentialSampler(dataset, batch_size=4), **kwargs)


def _firsts(batches) -> list[int]:
    return [int(b[0, 0]) for b in batches]


def _worker_pids(no_leaks) -> set[int]:
    """This test's worker processes (multiprocessing's own helpers were there before it)."""
    return {p.pid for p in psutil.Process().children(recursive=True)} - no_leaks.children


def _assert_gone(pids: set[int]) -> None:
    assert_processes_stop(pids, within=notice_within())


# -- 1. the epoch keeps alive what it runs on --------------------------------------------


def test_a_temporary_persistent_loader_serves_its_whole_epoch(no_leaks, start_method):
    got = _firsts(b for b in _numbers(persistent_workers=True, num_workers=2, multiprocessing_context=start_method))
    assert got == list(range(0, 40, 4))
    no_leaks.check(grace=notice_within())  # the loader is gone and its epoch ended: so are its workers


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(num_workers=2, persistent_workers=True, worker_type="thread"),
        dict(num_workers=2, persistent_workers=True, preload=True),
        dict(num_workers=2, persistent_workers=True, buffer_size=2),
    ],
    ids=["threads", "preload", "buffer"],
)
def test_a_temporary_persistent_loader_serves_its_whole_epoch_in_every_mode(no_leaks, kwargs):
    assert _firsts(b for b in _numbers(multiprocessing_context="fork", **kwargs)) == list(range(0, 40, 4))
    no_leaks.check(grace=notice_within())


@pytest.mark.parametrize("parallel_stream", [False, True], ids=["main-reads", "workers-read"])
def test_a_temporary_fixed_size_loader_serves_its_whole_epoch(no_leaks, parallel_stream):
    loader = DataLoader(
        ShardedStream(1000), StreamSampler(batch_size=2), num_workers=2, epoch_size=7,
        parallel_stream=parallel_stream, multiprocessing_context="fork",
    )
    it = iter(loader)
    del loader  # the feed, and with parallel_stream the workers, live on with the epoch
    assert sum(1 for _ in it) == 7
    no_leaks.check(grace=notice_within())


def test_a_loader_dropped_mid_epoch_stops_its_workers_when_the_epoch_ends(no_leaks):
    loader = _numbers(num_workers=2, persistent_workers=True, multiprocessing_context="fork")
    it = iter(loader)
    first = _firsts([next(it)])
    pids = _worker_pids(no_leaks)
    del loader
    assert first + _firsts(it) == list(range(0, 40, 4))
    _assert_gone(pids)


def test_a_loader_dropped_with_no_open_epoch_stops_its_workers_though_an_old_iterator_is_held(no_leaks):
    loader = _numbers(num_workers=2, persistent_workers=True, multiprocessing_context="fork")
    it = iter(loader)
    assert len(_firsts(it)) == 10  # exhausted, and still referenced below
    pids = _worker_pids(no_leaks)
    assert pids, "the workers did not persist"
    del loader  # no close(), no gc.collect()
    _assert_gone(pids)
    assert it.closed


# -- 2. a second iter(loader) -----------------------------------------------------------


def _supersede(loader: DataLoader, taken: int = 3) -> tuple[list[int], list[int], DataLoaderError]:
    """Take ``taken`` batches of one epoch, start the next, and go on with the first."""
    first = iter(loader)
    head = [next(first) for _ in range(taken)]
    second = iter(loader)
    with pytest.raises(DataLoaderError, match=SUPERSEDED) as info:
        next(first)
    with pytest.raises(DataLoaderError, match=SUPERSEDED):
        next(first)  # every time, not once
    return _firsts(head), _firsts(second), info.value


def test_a_second_iter_on_persistent_workers_supersedes_the_first(no_leaks, start_method):
    loader = _numbers(400, num_workers=2, persistent_workers=True, multiprocessing_context=start_method)
    try:
        head, second, error = _supersede(loader)
        assert head == [0, 4, 8]
        assert second == list(range(0, 400, 4)), "the newer epoch must be whole"
        assert "epoch 0" in str(error) and "epoch 1" in str(error)
        assert _firsts(loader) == list(range(0, 400, 4))  # and the workers serve the next one
    finally:
        loader.close()


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(num_workers=2, persistent_workers=True, worker_type="thread"),
        dict(num_workers=2, persistent_workers=True, preload=True),
        dict(num_workers=2, persistent_workers=True, buffer_size=2),
        dict(num_workers=2, persistent_workers=True, repeats=2),
    ],
    ids=["threads", "preload", "buffer", "repeats"],
)
def test_a_second_iter_supersedes_the_first_in_every_mode(no_leaks, kwargs):
    loader = _numbers(400, multiprocessing_context="fork", **kwargs)
    try:
        head, second, _ = _supersede(loader)
        repeats = kwargs.get("repeats", 1)
        assert second == [i for i in range(0, 400, 4) for _ in range(repeats)]
    finally:
        loader.close()


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(),
        dict(buffer_size=2),
        dict(num_workers=2),
        dict(num_workers=2, persistent_workers=True),
        dict(num_workers=2, parallel_stream=True),
    ],
    ids=["serial", "serial-buffer", "workers", "persistent", "parallel-stream"],
)
def test_a_second_iter_over_a_fixed_size_feed_supersedes_the_first(no_leaks, kwargs):
    loader = DataLoader(RangeStream(10**6), StreamSampler(batch_size=2), epoch_size=10,
                        multiprocessing_context="fork", **kwargs)
    try:
        first = iter(loader)
        head = [int(next(first)["index"][0]) for _ in range(3)]
        second = iter(loader)
        with pytest.raises(DataLoaderError, match=SUPERSEDED):
            next(first)
        rest = [int(b["index"][0]) for b in second]
        assert len(rest) == 10
        if not kwargs.get("parallel_stream"):
            assert head == [0, 2, 4]
            assert rest == sorted(rest) and rest[0] > head[-1], "the epochs' batches interleaved"
    finally:
        loader.close()


@pytest.mark.parametrize("kwargs", [dict(), dict(num_workers=2)], ids=["serial", "workers"])
def test_two_epochs_of_a_plain_loader_are_independent_and_both_whole(no_leaks, kwargs):
    loader = _numbers(40, multiprocessing_context="fork", **kwargs)
    first = iter(loader)
    head = _firsts([next(first)])
    second = iter(loader)
    assert head + _firsts(first) == list(range(0, 40, 4))
    assert _firsts(second) == list(range(0, 40, 4))


def test_loader_close_ends_the_open_epoch_with_an_error(no_leaks):
    loader = _numbers(400, num_workers=2, persistent_workers=True, multiprocessing_context="fork")
    it = iter(loader)
    next(it)
    loader.close()
    with pytest.raises(DataLoaderError, match=LOADER_CLOSED):
        next(it)
    assert _firsts(loader)[:2] == [0, 4]  # a fresh pool for the next epoch
    loader.close()


# -- 3. close() from another thread while next() waits ------------------------------------

GATED_MODES = {
    "processes": dict(num_workers=2),
    "threads": dict(num_workers=2, worker_type="thread"),
    "preload": dict(num_workers=2, preload=True),
    "buffer": dict(num_workers=2, buffer_size=2),
    "repeats": dict(num_workers=2, repeats=3),
    "persistent": dict(num_workers=2, persistent_workers=True),
    "persistent-preload": dict(num_workers=2, persistent_workers=True, preload=True),
    "serial-buffer": dict(buffer_size=2),
    "serial-preload": dict(preload=True),
    "serial-repeats": dict(repeats=2),
}


class _Consumer(threading.Thread):
    """Iterates ``it`` to its end in a thread of its own; records how and when it ended."""

    def __init__(self, it) -> None:
        super().__init__(name="test-consumer", daemon=True)
        self.it = it
        self.batches = 0
        self.error: BaseException | None = None
        self.ended_at: float | None = None
        self.ended = threading.Event()
        self.start()

    def run(self) -> None:
        try:
            for _ in self.it:
                self.batches += 1
        except BaseException as error:  # noqa: BLE001 - recorded for the test
            self.error = error
        finally:
            self.ended_at = time.monotonic()
            self.ended.set()


def _open_once_ended(consumer: _Consumer, gate: str) -> threading.Thread:
    """A thread that opens ``gate`` once the consumer has come out of next() (or the time to
    notice has passed), so that a thread stuck in the dataset, which close() waits for, returns
    without the gate having let the consumer out."""

    def run() -> None:
        consumer.ended.wait(notice_within() + 1.0)
        open(gate, "w").close()

    opener = threading.Thread(target=run, name="test-gate-opener", daemon=True)
    opener.start()
    return opener


def _close_while_waiting(close, consumer: _Consumer, gate: str | None = None) -> float:
    """Let the consumer block in next(), call ``close`` here, and return how long the consumer
    took to come out of it."""
    time.sleep(0.5)  # the consumer is now waiting for a batch that will not come
    assert consumer.ended_at is None, f"the consumer ended before the close: {consumer.error!r}"
    closed_at = time.monotonic()
    opener = _open_once_ended(consumer, gate) if gate is not None else None
    close()
    consumer.join(notice_within() + 1.0)
    assert not consumer.is_alive(), "the consumer still waits after close() from another thread"
    if opener is not None:
        opener.join()
    return consumer.ended_at - closed_at


@pytest.mark.parametrize("mode", list(GATED_MODES))
def test_close_from_another_thread_wakes_a_waiting_next(no_leaks, mode, tmp_path):
    gate = str(tmp_path / "gate")
    dataset = GatedDataset(64, gate, gated_index=0)
    loader = DataLoader(dataset, SequentialSampler(dataset, batch_size=4), multiprocessing_context="fork",
                        **GATED_MODES[mode])
    it = iter(loader)
    consumer = _Consumer(it)
    took = _close_while_waiting(it.close, consumer, gate)
    assert took < notice_within(), f"the consumer woke {took:.2f} s after close()"
    assert isinstance(consumer.error, DataLoaderError), f"got {consumer.error!r}"
    assert CLOSED_ELSEWHERE in str(consumer.error)
    with pytest.raises(StopIteration):
        next(it)  # a closed epoch, as after any close()
    loader.close()
    del it, consumer
    gc.collect()
    no_leaks.check(grace=notice_within() + 1.0)


def test_close_from_another_thread_wakes_a_waiting_next_under_every_start_method(no_leaks, start_method, tmp_path):
    gate = str(tmp_path / "gate")
    dataset = GatedDataset(64, gate, gated_index=0)
    loader = DataLoader(dataset, SequentialSampler(dataset, batch_size=4), num_workers=2,
                        multiprocessing_context=start_method)
    it = iter(loader)
    consumer = _Consumer(it)
    took = _close_while_waiting(it.close, consumer, gate)
    assert took < notice_within() and CLOSED_ELSEWHERE in str(consumer.error), (took, consumer.error)
    del it, consumer
    gc.collect()
    no_leaks.check(grace=notice_within() + 1.0)


def test_close_from_another_thread_ends_a_serial_next_once_its_batch_is_made(no_leaks):
    # Serial mode makes the batch in the consumer's own thread, in your code: nothing can
    # interrupt it, so the consumer comes out when that batch is made (0.4 s here), without it.
    dataset = Numbers(400, delay=0.1)
    it = iter(DataLoader(dataset, SequentialSampler(dataset, batch_size=4)))
    consumer = _Consumer(it)
    took = _close_while_waiting(it.close, consumer)
    assert took < notice_within(), f"the consumer woke {took:.2f} s after close()"
    assert CLOSED_ELSEWHERE in str(consumer.error), repr(consumer.error)
    del it, consumer
    no_leaks.check(grace=notice_within())


@pytest.mark.parametrize("how", ["iter", "loader.close"])
def test_a_waiting_next_on_persistent_workers_wakes_when_another_thread_ends_its_epoch(no_leaks, how, tmp_path):
    gate = str(tmp_path / "gate")
    dataset = GatedDataset(64, gate, gated_index=0)
    loader = DataLoader(dataset, SequentialSampler(dataset, batch_size=4), num_workers=2,
                        persistent_workers=True, multiprocessing_context="fork")
    try:
        consumer = _Consumer(iter(loader))
        newer = []
        took = _close_while_waiting(
            (lambda: newer.append(iter(loader))) if how == "iter" else loader.close, consumer, gate
        )
        assert took < notice_within(), f"the consumer woke {took:.2f} s after {how}"
        assert isinstance(consumer.error, DataLoaderError), repr(consumer.error)
        assert (SUPERSEDED if how == "iter" else LOADER_CLOSED) in str(consumer.error)
        if newer:
            assert [int(b["index"][0]) for b in newer[0]] == list(range(0, 64, 4))
    finally:
        loader.close()
    del consumer, newer
    gc.collect()
    no_leaks.check(grace=notice_within() + 1.0)


def test_next_from_two_threads_at_once_hands_each_batch_out_once(no_leaks):
    loader = _numbers(400, num_workers=2, multiprocessing_context="fork")
    it = iter(loader)
    seen: list[int] = []
    errors: list[BaseException] = []

    def take() -> None:
        try:
            for batch in it:
                seen.append(int(batch[0, 0]))
        except BaseException as error:  # noqa: BLE001 - the test reports it
            errors.append(error)

    threads = [threading.Thread(target=take) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors, f"a thread's loop ended with {errors!r}: the epoch's end is StopIteration for both"
    assert sorted(seen) == list(range(0, 400, 4))


def test_a_thread_buffer_closed_from_another_thread_ends_a_waiting_next(no_leaks, tmp_path):
    # The same BufferedIterator runs the loader's buffer and preload threads: a consumer waiting on
    # it wakes when it is closed, and a next() after close() ends instead of waiting forever.
    from dataloader import ThreadBuffer

    gate = str(tmp_path / "gate")
    dataset = GatedDataset(8, gate, gated_index=0)
    it = iter(ThreadBuffer((dataset[i] for i in range(8)), buffer_size=2))
    consumer = _Consumer(it)
    took = _close_while_waiting(it.close, consumer, gate)
    assert took < notice_within() and consumer.error is None, (took, consumer.error)  # StopIteration
    with pytest.raises(StopIteration):
        next(it)
    del it, consumer
    no_leaks.check(grace=notice_within())
