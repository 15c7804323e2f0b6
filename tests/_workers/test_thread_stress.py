"""Thread workers under stress: many threads, many epochs, out of order, failures, resizes, resumes.

On a free-threaded Python (3.14t with the GIL off) the worker threads run Python at the same
time, so whatever they share (the pool's channels, the dataset, its caches, the stream they
read, the error policy) must be safe without the GIL. Each test runs 8 thread workers over
several epochs with ``in_order=False`` and checks what a race would break: every sample exactly
once per epoch, no batch repeated or lost, each batch equal element by element to the one a
serial run (and a process-worker run) makes (seeding is per batch), and nothing left behind
(``no_leaks``: threads, descriptors). ``DATALOADER_STRESS=1`` runs more epochs, samples and
workers (the free-threaded CI run and a hunt for races); the default run takes a few seconds.
On a GIL build the tests shorten the switch interval so threads swap often mid-bytecode-run.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dataloader import DataLoader, Dataset, MixedStream, RandomSampler, StreamDataset, StreamSampler, batch_rng, get_worker_info
from dataloader.columnar import ParquetDataset, ParquetStream
from dataloader.transform import Transform
from tests._exec.test_resizing import ScriptedPolicy
from tests.harness import assert_same_batches, check_loader_resumes, collect

STRESS = os.environ.get("DATALOADER_STRESS", "") not in ("", "0")
WORKERS = 14 if STRESS else 8
EPOCHS = 20 if STRESS else 3
SAMPLES = 600 if STRESS else 120
BATCH = 3
# Process workers as the reference: forked (the batches do not depend on the start method, and
# forkserver or spawn would start each worker in a new interpreter: seconds a test on 2 cores).
FORKED = {"worker_type": "process", "multiprocessing_context": "fork", "persistent_workers": True}
# Python 3.12+ warns at a fork while native threads run (pyarrow's pools, on 3.14t): the loader's
# forked workers are built for that (see docs/design/workers.md).
forks = pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")


@pytest.fixture(autouse=True)
def switch_often():
    """On a GIL build, threads swap every microsecond rather than every 5 ms: a check-then-act
    on shared state is then interrupted as it would be by a thread running beside it."""
    if getattr(sys, "_is_gil_enabled", lambda: True)():
        before = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)
        yield
        sys.setswitchinterval(before)
    else:
        yield


def _busy(index: int) -> int:
    """A little pure-Python work, so that threads overlap in Python code."""
    total = 0
    for k in range(40):
        total += (index * 31 + k) % 7
    return total


class Numbered(Dataset):
    """``{"index", "work"}`` per sample; samples at ``bad`` raise (or, for odd ones, return None)."""

    def __init__(self, size: int, bad: frozenset = frozenset()) -> None:
        self.size, self.bad = size, bad

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> dict:
        if index in self.bad:
            if index % 2:
                return None
            raise ValueError(f"sample {index} is bad")
        return {"index": np.int64(index), "work": np.int64(_busy(index))}


class Jitter(Transform):
    """Draws from the batch's generator: a batch made by another thread must draw the same."""

    def apply(self, sample: dict) -> dict:
        return {**sample, "noise": batch_rng().random(2), "worker": np.int64(_worker())}


def _worker() -> int:
    info = get_worker_info()
    return -1 if info is None else info.id


def _map_loader(num_workers: int, size: int = SAMPLES, **options) -> DataLoader:
    dataset = options.pop("dataset", None) or Numbered(size, options.pop("bad", frozenset()))
    sampler = RandomSampler(dataset, batch_size=BATCH, seed=4)
    return DataLoader(dataset, sampler, transform=Jitter(), seed=11, num_workers=num_workers, **options)


def _epochs(loader: DataLoader, epochs: int = EPOCHS) -> list[list[dict]]:
    return [collect(loader) for _ in range(epochs)]


def _keyed(batches: list[dict]) -> dict[tuple, dict]:
    """Batches by the indices they hold (an unordered epoch's batches come in any order)."""
    keyed = {tuple(batch["index"].tolist()): batch for batch in batches}
    assert len(keyed) == len(batches), "a batch came twice"
    return keyed


def _same_epoch(expected: list[dict], got: list[dict], ignore: tuple[str, ...] = ("worker",)) -> None:
    """``got`` holds the batches of ``expected`` in any order, each equal element by element."""
    want, have = _keyed(expected), _keyed(got)
    assert want.keys() == have.keys()
    for key, batch in want.items():
        assert_same_batches([_without(batch, ignore)], [_without(have[key], ignore)])


def _without(batch: dict, names: tuple[str, ...]) -> dict:
    return {name: value for name, value in batch.items() if name not in names}


def _indices(batches: list[dict]) -> list[int]:
    return sorted(i for batch in batches for i in batch["index"].tolist())


@pytest.mark.parametrize("persistent", [False, True])
def test_every_sample_once_an_epoch_out_of_order(no_leaks, persistent):
    serial = _epochs(_map_loader(0))
    loader = _map_loader(WORKERS, worker_type="thread", in_order=False, persistent_workers=persistent)
    threaded = _epochs(loader)
    loader.close()
    for want, got in zip(serial, threaded):
        assert _indices(got) == list(range(SAMPLES))
        _same_epoch(want, got)
    workers = {int(w) for epoch in threaded for batch in epoch for w in batch["worker"]}
    assert len(workers) > 1, "one thread made every batch: the test raced nothing"


@pytest.mark.parametrize("on_error", ["skip", "replace"])
def test_bad_samples_are_left_out_or_replaced_as_in_serial(no_leaks, on_error):
    bad = frozenset(range(5, SAMPLES, 7))
    serial_loader = _map_loader(0, bad=bad, on_error=on_error, max_errors=0.5)
    serial = _epochs(serial_loader, 2)
    loader = _map_loader(WORKERS, bad=bad, on_error=on_error, max_errors=0.5, worker_type="thread", in_order=False)
    threaded = [collect(loader) for _ in range(2)]
    failed = loader.stats().failed_samples
    for want, got in zip(serial, threaded):
        _same_epoch(want, got)
        if on_error == "skip":
            assert _indices(got) == sorted(set(range(SAMPLES)) - bad)
    assert failed == serial_loader.stats().failed_samples >= len(bad)  # replace: bad substitutes too


@forks
def test_thread_and_process_workers_make_identical_batches(no_leaks):
    processes = collect(_map_loader(2, **FORKED))  # forked first: no thread of ours is running
    serial = collect(_map_loader(0))
    threads = collect(_map_loader(WORKERS, worker_type="thread", in_order=False))
    _same_epoch(serial, threads)
    _same_epoch(serial, processes)
    _same_epoch(processes, threads)


def test_the_pool_grows_and_shrinks_under_load(no_leaks, tuned_every_batch):
    epochs = EPOCHS if STRESS else 2
    fixed = _epochs(_map_loader(0), epochs)
    loader = _map_loader("auto", worker_type="thread", in_order=False)
    policy = ScriptedPolicy([WORKERS, 1, WORKERS // 2, 2, WORKERS])
    loader._pipeline._tuner.policy = policy
    for want in fixed:
        _same_epoch(want, collect(loader))
    assert policy.windows >= 3, "the pool never changed: the test would prove nothing"
    assert len({change.workers for change in loader.stats().tuning}) > 1


@pytest.mark.parametrize("cut", [7, 29])
def test_a_resume_mid_epoch_continues_exactly(no_leaks, cut):
    def make() -> DataLoader:
        return _map_loader(WORKERS, size=60, worker_type="thread", persistent_workers=True)

    check_loader_resumes(make, "index", cut)


# -- streams -------------------------------------------------------------------------------


class Counting(StreamDataset):
    """``{"index", "epoch"}`` for a shard of ``range(length)`` per worker; the epoch is what
    ``set_epoch`` said, read as the iterator opens (as a stream that shuffles per epoch does)."""

    def __init__(self, length: int) -> None:
        self.length, self.epoch = length, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self):
        epoch = self.epoch
        info = get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        return ({"index": np.int64(i), "epoch": np.int64(epoch)} for i in range(start, self.length, step))


@pytest.mark.parametrize("parallel_stream", [False, True])
def test_a_stream_read_by_thread_workers(no_leaks, parallel_stream):
    dataset = Counting(SAMPLES)
    loader = DataLoader(
        dataset, StreamSampler(batch_size=BATCH), num_workers=WORKERS, worker_type="thread",
        parallel_stream=parallel_stream, in_order=False, persistent_workers=True,
    )
    for epoch in range(EPOCHS):
        batches = collect(loader)
        assert _indices(batches) == list(range(SAMPLES))
        assert {int(e) for batch in batches for e in batch["epoch"]} == {epoch}


def test_a_stream_restarted_by_each_thread_keeps_its_epochs_apart(no_leaks):
    """Fixed-size epochs (``epoch_size``): each worker restarts its own shard when it ends, so
    the threads open passes of the shared stream at different times; each pass must read the
    epoch it was opened for, not the one another thread set meanwhile."""
    length, workers = 4 * WORKERS, WORKERS
    dataset = Counting(length)
    loader = DataLoader(
        dataset, StreamSampler(batch_size=1), num_workers=workers, worker_type="thread",
        parallel_stream=True, in_order=False, epoch_size=3 * length, persistent_workers=True,
    )
    samples = [(int(b["index"][0]), int(b["epoch"][0])) for _ in range(2) for b in loader]
    loader.close()
    by_worker: dict[int, list] = {}
    for index, epoch in samples:
        by_worker.setdefault(index % workers, []).append((epoch, index))
    for worker, read in by_worker.items():
        mine = list(range(worker, length, workers))
        passes = [read[k : k + len(mine)] for k in range(0, len(read), len(mine))]
        for number, one in enumerate(passes):
            assert [i for _, i in one] == mine[: len(one)]
            assert {e for e, _ in one} == {number}, f"worker {worker}'s pass {number} read another pass's epoch"


class WhoReads(Counting):
    """As :class:`Counting`, with which object the worker iterates and what its info names."""

    def __iter__(self):
        info = get_worker_info()
        me = np.int64(id(self) if info.dataset is self else -1)
        return ({**row, "reader": me} for row in super().__iter__())


def test_each_thread_reads_its_own_copy_of_a_stream(no_leaks):
    dataset = WhoReads(4 * WORKERS)
    loader = DataLoader(
        dataset, StreamSampler(batch_size=1), num_workers=WORKERS, worker_type="thread", parallel_stream=True,
    )
    readers = {int(batch["reader"][0]) for batch in loader}
    assert -1 not in readers, "get_worker_info().dataset is not the stream the worker reads"
    assert id(dataset) not in readers and len(readers) == WORKERS


@pytest.fixture
def parquet_files(tmp_path) -> list[str]:
    paths = []
    for file in range(3):
        rows = np.arange(file * 100, file * 100 + 100, dtype=np.int64)
        path = str(tmp_path / f"part-{file}.parquet")
        pq.write_table(pa.table({"index": rows, "square": rows * rows}), path, row_group_size=10)
        paths.append(path)
    return paths


@forks
@pytest.mark.parametrize("parallel_stream", [False, True])
def test_a_parquet_stream_read_by_thread_workers(no_leaks, parquet_files, parallel_stream):
    """Read in this thread and transformed by the threads, or read by each thread (its shard
    depends on the worker count: the reference is as many process workers)."""
    workers = 4 if parallel_stream else WORKERS

    def make(num_workers: int, **options) -> DataLoader:
        stream = ParquetStream(parquet_files, shuffle=True, seed=3, shuffle_buffer=16)
        return DataLoader(
            stream, StreamSampler(batch_size=BATCH), num_workers=num_workers, parallel_stream=parallel_stream,
            seed=5, **options,
        )

    reference = make(workers, **FORKED) if parallel_stream else make(0)
    expected = _epochs(reference, 2)
    reference.close()
    loader = make(workers, worker_type="thread", in_order=False)
    for want in expected:
        batches = collect(loader)
        assert _indices(batches) == list(range(300))
        for batch in batches:
            np.testing.assert_array_equal(batch["square"], batch["index"] ** 2)
        _same_epoch(want, batches, ignore=())


def test_a_parquet_dataset_shared_by_thread_workers(no_leaks, parquet_files):
    """Its cache of decoded row groups and its open files are shared by the threads."""
    dataset = ParquetDataset(parquet_files, cache_row_groups=2)
    serial = _epochs(_map_loader(0, dataset=dataset), 2)
    loader = _map_loader(WORKERS, dataset=dataset, worker_type="thread", in_order=False)
    for want in serial:
        got = collect(loader)
        _same_epoch(want, got)
        for batch in got:
            np.testing.assert_array_equal(batch["square"], batch["index"] ** 2)


def _tilt(drawn: int) -> list[float]:
    """A weight schedule that changes every 64 draws (its cache is shared by the threads)."""
    return [1.0 + (drawn // 64) % 3, 1.0, 2.0]


class Squares(Dataset):
    """``{"index", "square"}`` of ``offset + i``: a map source of a mix."""

    def __init__(self, size: int, offset: int) -> None:
        self.size, self.offset = size, offset

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> dict:
        value = np.int64(self.offset + index)
        return {"index": value, "square": value * value}


class EpochSquares(Counting):
    """As :class:`Counting`, with rows like a Parquet file's: the value says the epoch read.
    Its ``set_epoch`` works on after storing the epoch (as one that plans the epoch's order
    would), which leaves room for another thread's ``set_epoch`` before this one's ``iter()``."""

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch
        self.plan = [_busy(epoch + k) for k in range(20)]

    def __iter__(self):
        return ({"index": row["index"] + 10_000 * (1 + row["epoch"]), "square": np.int64(0)} for row in super().__iter__())


@forks
def test_a_mix_read_by_thread_workers_equals_process_workers(no_leaks, parquet_files):
    """Each thread reads its own copy of the mix, whose sources (streams and a map dataset) and
    schedule the copies share; sources run out and restart at their own epochs in each thread."""

    def make(**options) -> DataLoader:
        mix = MixedStream(
            {"stream": ParquetStream(parquet_files[:2]), "map": Squares(30, 1000), "epochs": EpochSquares(40)},
            weights=_tilt, stop="never", seed=2,
        )
        return DataLoader(
            mix, StreamSampler(batch_size=BATCH), num_workers=4, parallel_stream=True, epoch_size=40 * BATCH,
            seed=1, **options,
        )

    processes = make(**FORKED)
    expected = _epochs(processes)
    processes.close()
    threads = make(worker_type="thread", persistent_workers=True)
    for want in expected:
        assert_same_batches(want, collect(threads))
    threads.close()


class _Count(StreamDataset):
    def __iter__(self):
        return ({"v": np.int64(i)} for i in range(20))


class _ThroughALoader(StreamDataset):
    """A mix source whose items come from another loader with thread workers reading a mix."""

    def __iter__(self):
        inner = DataLoader(MixedStream({"x": _Count()}, seed=0), StreamSampler(batch_size=1), num_workers=2,
                           parallel_stream=True, worker_type="thread")
        with iter(inner) as batches:
            for batch in batches:
                yield {"v": batch["v"][0]}


@pytest.mark.timeout(60)
def test_a_mix_source_read_through_another_threaded_loader_does_not_deadlock(no_leaks):
    """Opening a shared source locks that source only: the outer worker thread holds its
    source's lock while the inner loader's threads open theirs."""
    outer = DataLoader(MixedStream({"a": _ThroughALoader()}, seed=0), StreamSampler(batch_size=2), num_workers=2,
                       parallel_stream=True, worker_type="thread")
    values = [int(v) for batch in outer for v in batch["v"]]
    # Every worker, inner and outer, reads its whole unsharded stream: 2 x 2 copies of each.
    assert sorted(values) == sorted(list(range(20)) * 4)
