"""worker_type="thread": same batches, errors and timeouts as process workers."""

import os
import threading
import time

import numpy as np
import pytest

from dataloader import ArrayDataset, DataLoader, Dataset, RandomSampler, SequentialSampler, StreamDataset, StreamSampler
from dataloader import LoaderTimeoutError, WorkerError, get_worker_info
from dataloader.rng import batch_rng
from dataloader.transform import Transform
from tests.harness import assert_same_batches, collect


class Jitter(Transform):
    def apply(self, sample):
        return sample[0] + batch_rng().normal(size=sample[0].shape).astype(np.float32), sample[1]


class WhoAmI(Dataset):
    def __len__(self):
        return 16

    def __getitem__(self, index):
        info = get_worker_info()
        return np.int64(index), np.int64(-1 if info is None else info.id), threading.current_thread().name


def dataset():
    return ArrayDataset(np.arange(60, dtype=np.float32).reshape(30, 2), np.arange(30))


@pytest.mark.parametrize("worker_type", ["thread", "process"])
def test_seeded_batches_match_serial_for_any_worker_type(worker_type, no_leaks):
    data = dataset()

    def make(num_workers):
        return DataLoader(data, RandomSampler(data, batch_size=4, seed=3), transform=Jitter(), seed=9,
                          num_workers=num_workers, worker_type=worker_type)

    assert_same_batches(collect(make(0)), collect(make(2)))


def test_thread_workers_run_in_threads_with_worker_info(no_leaks):
    loader = DataLoader(WhoAmI(), SequentialSampler(WhoAmI(), batch_size=4), num_workers=2, worker_type="thread")
    batches = list(loader)
    assert sorted(np.concatenate([b[0] for b in batches]).tolist()) == list(range(16))
    ids = set(np.concatenate([b[1] for b in batches]).tolist())
    assert ids <= {0, 1} and ids
    assert all(name.startswith("dataloader-thread-worker-") for b in batches for name in b[2])


def test_thread_worker_errors_are_rebuilt_like_process_errors(no_leaks):
    class Bad(Dataset):
        def __len__(self):
            return 8

        def __getitem__(self, index):
            if index == 5:
                raise KeyError("missing")
            return np.int64(index)

    loader = DataLoader(Bad(), SequentialSampler(Bad(), batch_size=2), num_workers=2, worker_type="thread")
    with pytest.raises(KeyError) as caught:
        list(loader)
    assert isinstance(caught.value, WorkerError)
    assert "Caught KeyError in DataLoader worker process" in str(caught.value)
    assert "[4, 5]" in str(caught.value)


def test_thread_worker_timeout_shows_the_stuck_stack(no_leaks):
    gate = threading.Event()

    class Stuck(Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, index):
            if index == 2:
                wait_for_the_gate_forever(gate)
            return np.int64(index)

    loader = DataLoader(Stuck(), SequentialSampler(Stuck(), batch_size=2), num_workers=1,
                        worker_type="thread", timeout=0.5)
    iterator = iter(loader)
    next(iterator)
    start = time.monotonic()
    with pytest.raises(LoaderTimeoutError, match="timeout") as caught:
        next(iterator)
    assert time.monotonic() - start < 3
    assert "wait_for_the_gate_forever" in str(caught.value)
    gate.set()


def wait_for_the_gate_forever(gate):
    gate.wait(10)


class Shards(StreamDataset):
    def __iter__(self):
        info = get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(np.arange(start, 23, step))


def test_thread_workers_read_parallel_streams(no_leaks):
    loader = DataLoader(Shards(), StreamSampler(batch_size=4), num_workers=2, worker_type="thread",
                        parallel_stream=True)
    values = np.concatenate(list(loader)).tolist()
    assert sorted(values) == list(range(23))


def test_persistent_thread_workers_survive_epochs_and_stop_on_close(no_leaks):
    data = dataset()
    loader = DataLoader(data, SequentialSampler(data, batch_size=8), num_workers=2, worker_type="thread",
                        persistent_workers=True)
    first = collect(loader)
    names = {t.name for t in threading.enumerate()}
    assert_same_batches(first, collect(loader))
    assert {t.name for t in threading.enumerate()} == names
    loader.close()


def _open_fds():
    return set(os.listdir("/proc/self/fd"))


def test_a_thread_stuck_in_a_sample_keeps_no_descriptor_after_close(no_leaks, monkeypatch):
    """A thread cannot be killed, but its channels and exit pipe (6 descriptors) are closed with
    the loader; when the sample returns later, the thread ends without an error."""
    gate = threading.Event()
    crashes = []
    monkeypatch.setattr(threading, "excepthook", crashes.append)

    class Stuck(Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, index):
            if index == 2:
                gate.wait()  # set below, so that the thread ends with the test
            return np.int64(index)

    before = _open_fds()
    stuck = []
    try:
        for _ in range(3):
            loader = DataLoader(Stuck(), SequentialSampler(Stuck(), batch_size=2), num_workers=1,
                                worker_type="thread", timeout=0.5)
            batches = iter(loader)
            next(batches)
            with pytest.raises(LoaderTimeoutError):
                next(batches)
            loader.close()
            stuck += [t for t in threading.enumerate() if t.name.startswith("dataloader-thread-worker-")
                      and t.is_alive() and t not in stuck]
            assert _open_fds() - before == set()
        assert len(stuck) == 3  # each loader left its thread in the sample
    finally:
        gate.set()
    for thread in stuck:
        thread.join(10)
    assert not any(thread.is_alive() for thread in stuck) and crashes == []
    assert _open_fds() - before == set()


class GlobalJitter(Transform):
    def apply(self, sample):
        return sample[0] + np.float32(np.random.rand()), sample[1]


@pytest.fixture
def global_draw_log(monkeypatch, caplog):
    """The records of the thread workers' global-draw check (told once per process: reset)."""
    from dataloader._stages import seeding

    monkeypatch.setattr(seeding, "_warned_global_draws", False)
    caplog.set_level("WARNING", logger="dataloader")
    return lambda: [r.getMessage() for r in caplog.records if "thread worker made batch" in r.getMessage()]


def test_a_transform_drawing_from_numpy_random_in_threads_is_told_once(global_draw_log, no_leaks):
    data = dataset()
    loader = DataLoader(data, batch_size=5, transform=GlobalJitter(), seed=3, num_workers=2, worker_type="thread")
    collect(loader)
    collect(loader)
    told = global_draw_log()
    assert len(told) == 1
    assert "batch_rng()" in told[0] and "worker_type='process'" in told[0]


@pytest.mark.parametrize("case", ["batch_rng", "unseeded", "processes"])
def test_no_global_draw_record_where_draws_follow_the_seed(case, global_draw_log, no_leaks):
    data = dataset()
    kwargs = {"transform": Jitter() if case == "batch_rng" else GlobalJitter(),
              "seed": None if case == "unseeded" else 3, "num_workers": 2,
              "worker_type": "process" if case == "processes" else "thread"}
    if case == "processes":
        kwargs["multiprocessing_context"] = "fork"
    collect(DataLoader(data, batch_size=5, **kwargs))
    assert global_draw_log() == []


class DrawingStream(StreamDataset):
    def __iter__(self):
        for _ in range(12):
            yield np.float64(np.random.random())


def test_a_stream_drawing_from_numpy_random_in_threads_is_told(global_draw_log, no_leaks):
    loader = DataLoader(DrawingStream(), StreamSampler(batch_size=3), num_workers=2, parallel_stream=True,
                        seed=1, worker_type="thread")
    assert sum(len(batch) for batch in loader) == 24
    assert len(global_draw_log()) == 1
