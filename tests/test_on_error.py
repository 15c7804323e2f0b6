"""Bad samples through a DataLoader: ``on_error="raise" | "skip" | "replace"``, ``max_errors``,
``error_log``, ``stats()`` and ``hooks``, in the main process and in real worker processes.

What is proven here:

- ``skip`` hands out exactly the good samples, in the same batches for 0, 1, 2 or 4 process
  workers, thread workers, ``in_order=False`` (the same multiset), persistent workers over two
  epochs, ``preload=True`` and ``repeats=2``; ``replace`` keeps every batch at the sampler's
  size with substitutes that are good samples, the same for any worker count.
- A stream whose transform fails on some samples is salvaged too; a stream whose own
  ``__iter__`` raises ends the epoch with its error.
- ``raise``: each batch with a bad sample raises at its turn and the loop goes on to the next;
  a state taken right after the error resumes with exactly the batches after it.
- ``max_errors`` as a count and as a fraction (judged from 1000 samples on, and at the epoch's
  end), and its default of 5%; the error log (argument or ``DATALOADER_ERROR_LOG``), ``stats()``.
- Resume under ``skip`` and ``replace`` with workers gives the uninterrupted run (fixed points,
  and a hypothesis property over the three policies and execution settings).
- Other sources: a CallableSource's jobs, split in chunks or not; a dataset whose
  ``__getitems__`` returns a ``Collated`` batch.
- Hooks see every sample once, in this process and in worker processes.
- An ImageFolder with a truncated JPEG, an empty file and a text file named .png loses exactly
  those three under ``skip``.
- No worker process, thread, descriptor or shared memory outlives a loader (``no_leaks``).
"""

from __future__ import annotations

import collections
import functools
import json
import multiprocessing
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dataloader import (
    CallableSource,
    Collated,
    DataLoader,
    Dataset,
    ImageFolder,
    RandomSampler,
    SampleFailure,
    SequentialSampler,
    StageHook,
    StreamDataset,
    StreamSampler,
    TooManyBadSamplesError,
    batch_rng,
)
from dataloader.errors import ArgumentTypeError, ArgumentValueError
from dataloader.transform import Transform
from tests.harness import assert_same_batches, collect, owned

# Process workers: fork where the platform has it (cheapest to start).
_FORK = "fork" if "fork" in multiprocessing.get_all_start_methods() else None

# -- datasets, transforms and hooks (module level: process workers unpickle them) ---------------

SIZE = 60
RAISING = (4, 17, 33, 50)  # the dataset raises ValueError
NONE = (22,)  # the dataset returns None
TRANSFORM_BAD = (45,)  # the transform raises ValueError
BAD = set(RAISING) | set(NONE) | set(TRANSFORM_BAD)
GOOD = [i for i in range(SIZE) if i not in BAD]


class Flaky(Dataset):
    """0..length-1 as int64; ``raising`` keys raise ValueError, ``none`` keys give None."""

    def __init__(self, length: int = SIZE, raising=RAISING, none=NONE) -> None:
        self.length, self.raising, self.none = length, frozenset(raising), frozenset(none)

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        if index in self.raising:
            raise ValueError(f"sample {index} is corrupt")
        if index in self.none:
            return None
        return np.int64(index)


class Noisy(Transform):
    """x * 1000 + a draw from ``batch_rng()`` (so batches show their seeding); raises
    ValueError on the ``bad`` samples; None stays None."""

    def __init__(self, bad=TRANSFORM_BAD) -> None:
        self.bad = frozenset(bad)

    def apply(self, sample):
        if sample is None:  # on_error="raise" hands a None sample on: the collator refuses it
            return None
        if int(sample) in self.bad:
            raise ValueError(f"cannot augment sample {int(sample)}")
        return np.int64(sample) * 1000 + batch_rng().integers(0, 1000)


class Stream(StreamDataset):
    """0..length-1; raises OSError at ``broken_at`` (the stream itself fails there)."""

    def __init__(self, length: int, broken_at: int | None = None) -> None:
        self.length, self.broken_at = length, broken_at

    def __iter__(self):
        for i in range(self.length):
            if i == self.broken_at:
                raise OSError(f"the stream broke at {i}")
            yield np.int64(i)


def _job(value: int, bad: frozenset):
    if value in bad:
        raise ValueError(f"job {value} failed")
    return np.int64(value)


class Jobs:
    """A CallableSource's ``data_source``: batch k is jobs that make 4k..4k+3; ``bad`` ones raise."""

    def __init__(self, bad=()) -> None:
        self.next, self.bad = 0, frozenset(bad)

    def __call__(self, batch_size: int) -> list:
        values = range(self.next, self.next + batch_size)
        self.next += batch_size
        return [functools.partial(_job, value, self.bad) for value in values]


class BulkOnly(Dataset):
    """Reads whole batches with ``__getitems__`` as a :class:`Collated` without rows (allowed
    when the loader has no per-sample transform); a read that includes ``bad`` raises."""

    def __init__(self, length: int = 12, bad: int = 5) -> None:
        self.length, self.bad = length, bad

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        if index == self.bad:
            raise ValueError(f"sample {index} is corrupt")
        return np.int64(index)

    def __getitems__(self, indices: list) -> Collated:
        if self.bad in indices:
            raise ValueError(f"sample {self.bad} is corrupt")
        return Collated(np.array(indices, dtype=np.int64), len(indices))


class Counting(StageHook):
    """Keeps every event (num_workers=0: this very object sees them)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, object]] = []

    def before(self, event):
        self.events.append(("before", event))

    def after(self, event):
        self.events.append(("after", event))

    def failed(self, event, error):
        self.events.append(("failed", event))

    def keys(self, kind: str, stage: str, level: str = "batch") -> list:
        return [key for k, event in self.events if k == kind and event.stage == stage and event.level == level
                for key in event.indices]


class AppendLines(StageHook):
    """One line per batch-level fetch ``after`` event, appended (O_APPEND) to ``path``: the
    workers' pickled copies all write to the same file."""

    def __init__(self, path: str) -> None:
        self.path = path

    def after(self, event):
        if event.stage == "fetch" and event.level == "batch":
            line = f"{os.getpid()} {event.epoch} {event.batch} {','.join(map(str, event.indices))}\n"
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line.encode())
            finally:
                os.close(fd)


# -- helpers ------------------------------------------------------------------------------------


def loader(on_error: str = "skip", dataset=None, batch_size: int = 4, drop_last: bool = False, transform="noisy",
           num_workers: int = 0, **options) -> DataLoader:
    """A seeded loader over ``dataset`` (default: :class:`Flaky`) under a random sampler."""
    dataset = Flaky() if dataset is None else dataset
    if num_workers and options.get("worker_type", "process") == "process":
        options.setdefault("multiprocessing_context", _FORK)
    options.setdefault("max_errors", 50 if on_error != "raise" else None)
    return DataLoader(
        dataset, RandomSampler(dataset, batch_size=batch_size, drop_last=drop_last, seed=1),
        transform=Noisy() if transform == "noisy" else transform, seed=5, on_error=on_error,
        num_workers=num_workers, **options,
    )


def ids(batches: list) -> list[list[int]]:
    """The dataset keys behind :class:`Noisy`'s values."""
    return [(np.asarray(batch) // 1000).tolist() for batch in batches]


def flat(batches: list) -> list[int]:
    return [key for batch in ids(batches) for key in batch]


def sampler_batches(dataset, batch_size: int = 4, drop_last: bool = False, epoch: int = 0) -> list[list[int]]:
    sampler = RandomSampler(dataset, batch_size=batch_size, drop_last=drop_last, seed=1)
    sampler.set_epoch(epoch)
    return [list(map(int, batch)) for batch in sampler]


def drain(iterator, errors=(ValueError,), convert=lambda batch: np.asarray(batch).tolist()) -> list:
    """Every batch of an epoch as values, each batch that raised as the string "E"."""
    out: list = []
    while True:
        try:
            out.append(convert(next(iterator)))
        except StopIteration:
            return out
        except errors:
            out.append("E")


def log_lines(path) -> list[dict]:
    with open(path, encoding="utf-8") as file:
        return [json.loads(line) for line in file]


# -- skip ---------------------------------------------------------------------------------------

_SETTINGS = [
    pytest.param({"num_workers": 1}, id="1 process"),
    pytest.param({"num_workers": 2}, id="2 processes"),
    pytest.param({"num_workers": 4}, id="4 processes"),
    pytest.param({"num_workers": 2, "worker_type": "thread"}, id="2 threads"),
    pytest.param({"num_workers": 2, "preload": True}, id="preload"),
    pytest.param({"num_workers": 0, "preload": True}, id="preload serial"),
    pytest.param({"num_workers": 2, "prefetch_factor": 1}, id="prefetch 1"),
]


def test_skip_hands_out_exactly_the_good_samples():
    batches = collect(loader())
    keys = flat(batches)
    assert sorted(keys) == GOOD and len(keys) == len(set(keys))
    # Each batch is its sampler batch less the bad samples; no batch is empty.
    expected = [[k for k in batch if k not in BAD] for batch in sampler_batches(Flaky())]
    assert ids(batches) == [batch for batch in expected if batch]


@pytest.mark.parametrize("settings", _SETTINGS)
def test_skip_gives_the_same_batches_for_any_workers(settings, no_leaks):
    serial = collect(loader())
    assert_same_batches(serial, collect(loader(**settings)))


def test_skip_out_of_order_gives_the_same_multiset(no_leaks):
    serial = collect(loader())
    got = collect(loader(num_workers=2, in_order=False))
    assert collections.Counter(map(tuple, ids(got))) == collections.Counter(map(tuple, ids(serial)))
    assert collections.Counter(tuple(np.asarray(b).tolist()) for b in got) == collections.Counter(
        tuple(np.asarray(b).tolist()) for b in serial)


def test_skip_with_persistent_workers_over_two_epochs(no_leaks):
    serial = loader()
    expected = [collect(serial), collect(serial)]
    assert ids(expected[0]) != ids(expected[1])  # the epochs differ: the test compares two runs
    persistent = loader(num_workers=2, persistent_workers=True)
    for epoch in range(2):
        assert_same_batches(expected[epoch], collect(persistent))
        assert persistent.stats().failed_samples == len(BAD)
    persistent.close()


@pytest.mark.parametrize("on_error", ["skip", "replace"])
def test_an_abandoned_epoch_on_persistent_workers_leaves_the_next_one_whole(on_error, no_leaks):
    serial = loader(on_error, batch_size=3)
    collect(serial)
    expected = collect(serial)  # epoch 1
    persistent = loader(on_error, batch_size=3, num_workers=2, persistent_workers=True)
    with iter(persistent) as batches:  # epoch 0, left after two batches
        next(batches)
        next(batches)
    assert_same_batches(expected, collect(persistent))
    assert persistent.stats().failed_samples == serial.stats().failed_samples
    assert {r.epoch for r in persistent.stats().failures} == {1}
    persistent.close()


def test_skip_with_repeats_hands_each_batch_out_twice(no_leaks):
    once = collect(loader())
    for num_workers in (0, 2):
        twice = collect(loader(num_workers=num_workers, repeats=2))
        assert len(twice) == 2 * len(once)
        assert_same_batches(twice[0::2], once)
        assert_same_batches(twice[1::2], once)


def test_a_batch_of_bad_samples_only_is_left_out_of_the_epoch(no_leaks):
    # Sequential batches of 2: [16, 17] loses one sample, [44, 45] too, [22, 23] one; a
    # dataset where 4 and 5 both fail makes batch [4, 5] empty: it is left out.
    dataset = Flaky(raising=(4, 5, 17), none=(22,))
    for num_workers in (0, 2):
        got = DataLoader(dataset, SequentialSampler(dataset, batch_size=2), on_error="skip",
                         num_workers=num_workers, multiprocessing_context=_FORK if num_workers else None,
                         max_errors=10)
        batches = [np.asarray(b).tolist() for b in got]
        assert len(batches) == SIZE // 2 - 1
        assert [0, 1] in batches and [6, 7] in batches and [16] in batches and [23] in batches
        assert sorted(k for b in batches for k in b) == [i for i in range(SIZE) if i not in (4, 5, 17, 22)]
        assert got.stats().failed_samples == 4


# -- replace ------------------------------------------------------------------------------------


@pytest.mark.parametrize("drop_last", [False, True])
def test_replace_keeps_every_batch_at_the_samplers_size(drop_last, no_leaks):
    expected_sizes = [len(batch) for batch in sampler_batches(Flaky(), 8, drop_last)]
    assert set(expected_sizes) == ({8} if drop_last else {8, 4})
    serial = collect(loader("replace", batch_size=8, drop_last=drop_last))
    assert [len(batch) for batch in serial] == expected_sizes
    assert not set(flat(serial)) & BAD
    for settings in ({"num_workers": 2}, {"num_workers": 2, "worker_type": "thread"}):
        assert_same_batches(serial, collect(loader("replace", batch_size=8, drop_last=drop_last, **settings)))


def test_replace_records_good_substitutes_where_the_bad_samples_were(no_leaks):
    for num_workers in (0, 2):
        replacing = loader("replace", batch_size=8, num_workers=num_workers)
        batches = ids(collect(replacing))
        records = replacing.stats().failures
        replaced = [r for r in records if r.action == "replaced"]
        assert sorted(r.index for r in replaced) == sorted(BAD)
        for record in replaced:
            assert record.substitute not in BAD and 0 <= record.substitute < SIZE
            assert batches[record.batch][record.position] == record.substitute
        # Substitutes that failed themselves are recorded as skipped, with the bad key drawn.
        assert all(r.index in BAD for r in records if r.action == "skipped")
        assert replacing.stats().failed_samples == len(records)


# -- streams ------------------------------------------------------------------------------------


def _stream_loader(on_error: str, num_workers: int, **options) -> DataLoader:
    return DataLoader(
        Stream(30), StreamSampler(4), transform=Noisy(bad=(3, 10, 17, 24)), on_error=on_error, max_errors=10,
        seed=5, num_workers=num_workers, multiprocessing_context=_FORK if num_workers else None, **options,
    )


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_stream_skips_the_samples_its_transform_fails_on(num_workers, no_leaks):
    streaming = _stream_loader("skip", num_workers)
    got = collect(streaming)
    assert flat(got) == [i for i in range(30) if i not in (3, 10, 17, 24)]
    assert [len(b) for b in got] == [3, 4, 3, 4, 3, 4, 3, 2]
    assert_same_batches(got, collect(_stream_loader("skip", 0)))
    records = sorted(streaming.stats().failures, key=lambda r: r.batch)  # in the order they came
    assert [(r.index, r.batch, r.position, r.stage) for r in records] == [
        (None, 0, 3, "transform"), (None, 2, 2, "transform"), (None, 4, 1, "transform"), (None, 6, 0, "transform")]


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_stream_replaces_the_samples_its_transform_fails_on(num_workers, no_leaks):
    got = collect(_stream_loader("replace", num_workers))
    assert [len(b) for b in got] == [4] * 7 + [2]
    batches = ids(got)
    for batch, first in zip(batches, range(0, 30, 4)):
        # A stand-in is one of the batch's own good samples.
        assert set(batch) <= {i for i in range(first, first + 4) if i not in (3, 10, 17, 24)}
    assert_same_batches(got, collect(_stream_loader("replace", 0)))


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_stream_whose_own_iter_raises_ends_the_epoch_with_its_error(num_workers, no_leaks):
    """The stream itself is no sample to skip: its error ends the epoch, under any on_error."""
    broken = DataLoader(Stream(30, broken_at=10), StreamSampler(4), on_error="skip", num_workers=num_workers,
                        multiprocessing_context=_FORK if num_workers else None)
    got = []
    with pytest.raises(OSError, match="the stream broke at 10"):
        for batch in broken:
            got.append(np.asarray(batch).tolist())
    # What came before the error is the stream's start (with workers the error may come first).
    assert got == [[0, 1, 2, 3], [4, 5, 6, 7]][: len(got)]
    if num_workers == 0:
        assert len(got) == 2
    assert broken.stats().failed_samples == 0


# -- other sources ------------------------------------------------------------------------------


@pytest.mark.parametrize("num_workers", [0, 2])
def test_callable_jobs_are_skipped_and_replaced(num_workers, no_leaks):
    def run(on_error):
        jobs = DataLoader(CallableSource(Jobs(bad=(2, 13))), StreamSampler(4), epoch_size=4, on_error=on_error,
                          max_errors=10, seed=1, num_workers=num_workers,
                          multiprocessing_context=_FORK if num_workers else None)
        return [np.asarray(b).tolist() for b in jobs], sorted(jobs.stats().failures, key=lambda r: r.batch)

    skipped, records = run("skip")
    assert skipped == [[0, 1, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 14, 15]]
    assert [(r.index, r.batch, r.position, r.stage) for r in records] == [(None, 0, 2, "fetch"), (None, 3, 1, "fetch")]
    replaced, records = run("replace")
    assert [len(b) for b in replaced] == [4, 4, 4, 4]
    assert set(replaced[0]) == {0, 1, 3} and set(replaced[3]) == {12, 14, 15}
    assert [r.action for r in records] == ["replaced", "replaced"]


@pytest.mark.parametrize("chunk_size", [None, 2])
def test_a_failed_callable_source_batch_under_raise_ends_the_epoch(chunk_size, no_leaks):
    """Documented limit: a CallableSource does not go on past a batch that raised."""
    for num_workers in (0, 2):
        jobs = DataLoader(CallableSource(Jobs(bad=(5,)), chunk_size=chunk_size), StreamSampler(4), epoch_size=4,
                          num_workers=num_workers, multiprocessing_context=_FORK if num_workers else None)
        assert drain(iter(jobs)) == [[0, 1, 2, 3], "E"]


@pytest.mark.parametrize("num_workers", [0, 2])
def test_replace_keeps_the_batch_size_when_a_whole_chunk_of_a_split_batch_fails(num_workers, no_leaks):
    """chunk_size=2 splits each batch of 4 jobs in two tasks; both jobs of batch 0's second
    task fail. Replace keeps batch sizes fixed: their places take the batch's good samples."""
    jobs = DataLoader(CallableSource(Jobs(bad=(2, 3)), chunk_size=2), StreamSampler(4), epoch_size=2,
                      on_error="replace", max_errors=10, seed=1, num_workers=num_workers,
                      multiprocessing_context=_FORK if num_workers else None)
    batches = [np.asarray(b).tolist() for b in jobs]
    assert [len(b) for b in batches] == [4, 4]
    assert set(batches[0]) == {0, 1} and batches[1] == [4, 5, 6, 7]


@pytest.mark.parametrize("num_workers", [0, 2])
def test_records_of_a_split_batch_name_the_batch_handed_out_and_the_place_in_it(num_workers, no_leaks):
    """A failed job of a batch split into tasks (chunk_size) is recorded at the batch the user
    got and its position there, as for an unsplit batch (test_callable_jobs_are_skipped...)."""
    jobs = DataLoader(CallableSource(Jobs(bad=(2, 13)), chunk_size=2), StreamSampler(4), epoch_size=4,
                      on_error="skip", max_errors=10, seed=1, num_workers=num_workers,
                      multiprocessing_context=_FORK if num_workers else None)
    batches = [np.asarray(b).tolist() for b in jobs]
    assert batches == [[0, 1, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 14, 15]]
    records = sorted(jobs.stats().failures, key=lambda r: r.batch)
    assert [(r.batch, r.position) for r in records] == [(0, 2), (3, 1)]


@pytest.mark.parametrize("on_error", ["skip", "replace"])
def test_a_dataset_that_collates_its_own_batches_loses_only_its_bad_sample(on_error):
    """``__getitems__`` returns a Collated without rows (fine with no per-sample transform); the
    batch with sample 5 fails its bulk read, and the search one index at a time must find
    exactly sample 5, not fail every sample because a one-sample Collated has no rows."""
    dataset = BulkOnly()
    bulk = DataLoader(dataset, SequentialSampler(dataset, batch_size=4), on_error=on_error, max_errors=3, seed=1)
    batches = [np.asarray(b).ravel().tolist() for b in bulk]
    records = bulk.stats().failures
    assert [(r.index, r.error, r.message) for r in records if r.action != "skipped" or on_error == "skip"] == [
        (5, "ValueError", "sample 5 is corrupt")]
    assert batches[0] == [0, 1, 2, 3] and batches[-1] == [8, 9, 10, 11] and len(batches) == 3
    if on_error == "skip":
        assert batches[1] == [4, 6, 7]
    else:
        assert len(batches[1]) == 4 and 5 not in batches[1]


# -- raise --------------------------------------------------------------------------------------


def _raising(num_workers: int = 0, **options) -> DataLoader:
    # Every failure is a ValueError: the dataset's, the transform's, and the CollateError
    # (a ValueError) of the None sample, which "raise" hands to the collator.
    return loader("raise", num_workers=num_workers, **options)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_raise_raises_each_bad_batch_at_its_turn_and_goes_on(num_workers, no_leaks):
    iterator = iter(_raising(num_workers))
    errors, good = 0, []
    while True:
        try:
            good.append(np.asarray(next(iterator)).tolist())
        except ValueError:
            errors += 1
        except StopIteration:
            break
    batches = sampler_batches(Flaky())
    bad_batches = [b for b in batches if set(b) & BAD]
    assert errors == len(bad_batches) == 6
    assert ids(good) == [b for b in batches if not set(b) & BAD]
    assert list(iterator) == []


def test_raise_keeps_the_order_of_batches_and_errors(no_leaks):
    expected = ["E" if set(b) & BAD else b for b in sampler_batches(Flaky())]
    for settings in ({"num_workers": 0}, {"num_workers": 2}, {"num_workers": 2, "worker_type": "thread"}):
        got = drain(iter(_raising(**settings)))
        assert [x if x == "E" else (np.asarray(x) // 1000).tolist() for x in got] == expected


def test_raise_in_a_worker_names_the_sample_and_keeps_its_type(no_leaks):
    iterator = iter(_raising(2, batch_size=60 // 4))
    with pytest.raises(ValueError, match="is corrupt") as caught:
        while True:
            next(iterator)
    assert isinstance(caught.value, ValueError)
    iterator.close()


@pytest.mark.parametrize("saving_workers, resuming_workers", [(0, 0), (2, 0), (0, 2), (2, 2)])
def test_a_state_right_after_a_raised_error_resumes_after_it(saving_workers, resuming_workers, no_leaks):
    expected = drain(iter(_raising()))
    for errors_seen in (1, 2, 3):
        saving = _raising(saving_workers)
        iterator = iter(saving)
        head, seen = [], 0
        while seen < errors_seen:
            try:
                head.append(np.asarray(next(iterator)).tolist())
            except ValueError:
                head.append("E")
                seen += 1
        state = json.loads(json.dumps(saving.state_dict()))
        iterator.close()
        resumed = _raising(resuming_workers)
        resumed.load_state_dict(state)
        rest = drain(iter(resumed))
        assert head + rest == expected, errors_seen


# -- max_errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize("num_workers", [0, 2])
def test_more_failures_than_max_errors_stops_the_epoch(num_workers, no_leaks):
    dataset = Flaky(raising=(4, 17, 33), none=())
    stopping = loader(dataset=dataset, transform=None, max_errors=2, num_workers=num_workers)
    with pytest.raises(TooManyBadSamplesError, match=r"max_errors=2") as caught:
        collect(stopping)
    error = caught.value
    assert isinstance(error, RuntimeError)
    assert len(error.failures) == 3 and all(isinstance(r, SampleFailure) for r in error.failures)
    assert {r.index for r in error.failures} == {4, 17, 33}
    assert any(f"index {r.index}" in str(error) for r in error.failures)
    assert "3 samples failed" in str(error)


def test_as_many_failures_as_max_errors_pass():
    dataset = Flaky(raising=(4, 17, 33), none=())
    passing = loader(dataset=dataset, transform=None, max_errors=3)
    assert len(flat_plain(collect(passing))) == SIZE - 3
    assert passing.stats().failed_samples == 3


def flat_plain(batches: list) -> list[int]:
    return [key for batch in batches for key in np.asarray(batch).tolist()]


def _every(step: int, length: int = 2000, offset: int = 7) -> tuple:
    return tuple(range(offset, length, step))


@pytest.mark.parametrize("max_errors", [0.05, None])
def test_a_fraction_past_max_errors_stops_the_epoch_once_1000_samples_were_read(max_errors):
    dataset = Flaky(length=2000, raising=_every(10), none=())  # 10% bad
    stopping = loader(dataset=dataset, transform=None, batch_size=50, max_errors=max_errors)
    got = []
    with pytest.raises(TooManyBadSamplesError, match=r"5\.0%") as caught:
        for batch in stopping:
            got.append(batch)
    assert 1000 <= sum(len(b) for b in got) + len(caught.value.failures) < 1100  # judged at 1000 read
    assert stopping.stats().failed_samples == len(caught.value.failures) > 50


@pytest.mark.parametrize("max_errors", [0.05, None])
def test_a_fraction_under_max_errors_passes(max_errors):
    dataset = Flaky(length=2000, raising=_every(100), none=())  # 1% bad
    passing = loader(dataset=dataset, transform=None, batch_size=50, max_errors=max_errors)
    assert len(flat_plain(collect(passing))) == 2000 - 20
    assert passing.stats().failed_samples == 20


def test_a_fraction_is_judged_at_the_end_of_a_short_epoch(no_leaks):
    dataset = Flaky(length=100, raising=_every(10, 100), none=())  # 10%, fewer than 1000 read
    for num_workers in (0, 2):
        stopping = loader(dataset=dataset, transform=None, batch_size=10, max_errors=0.05, num_workers=num_workers)
        got = []
        with pytest.raises(TooManyBadSamplesError):
            for batch in stopping:
                got.append(batch)
        assert len(flat_plain(got)) == 90  # every batch came; the end of the epoch raised
    passing = loader(dataset=dataset, transform=None, batch_size=10, max_errors=0.1)
    assert len(flat_plain(collect(passing))) == 90


def test_max_errors_zero_stops_at_the_first_failure():
    with pytest.raises(TooManyBadSamplesError) as caught:
        collect(loader(max_errors=0))
    assert len(caught.value.failures) >= 1


@pytest.mark.parametrize(
    "kwargs, error",
    [({"max_errors": -1}, ArgumentValueError), ({"max_errors": 1.5}, ArgumentValueError),
     ({"max_errors": "x"}, ArgumentTypeError), ({"max_errors": True}, ArgumentTypeError),
     ({"on_error": "ignore"}, ArgumentValueError), ({"error_log": 3}, ArgumentTypeError),
     ({"hooks": [object()]}, ArgumentTypeError)],
)
def test_bad_arguments_are_refused_at_construction(kwargs, error):
    dataset = Flaky()
    with pytest.raises(error):
        DataLoader(dataset, SequentialSampler(dataset, batch_size=4), **kwargs)


# -- the error log and stats() -----------------------------------------------------------------


@pytest.mark.parametrize("num_workers", [0, 2])
def test_the_error_log_has_one_json_line_per_failed_sample(num_workers, tmp_path, no_leaks):
    path = tmp_path / "logs" / "bad.jsonl"
    logging = loader(num_workers=num_workers, error_log=str(path))
    collect(logging)
    lines = log_lines(path)
    assert len(lines) == len(BAD)
    assert {line["index"]: (line["stage"], line["error"], line["action"]) for line in lines} == {
        4: ("fetch", "ValueError", "skipped"), 17: ("fetch", "ValueError", "skipped"),
        33: ("fetch", "ValueError", "skipped"), 50: ("fetch", "ValueError", "skipped"),
        22: ("fetch", "SampleError", "skipped"), 45: ("transform", "ValueError", "skipped"),
    }
    assert all(line["epoch"] == 0 and line["message"] for line in lines)
    if num_workers:
        assert {line["worker"] for line in lines} <= {0, 1} and all(line["pid"] != os.getpid() for line in lines)
    else:
        assert {line["worker"] for line in lines} == {-1}
    collect(logging)  # a second epoch appends
    assert [line["epoch"] for line in log_lines(path)] == [0] * len(BAD) + [1] * len(BAD)


def test_the_error_log_has_every_failure_and_stats_keep_the_first_1000(tmp_path):
    path = tmp_path / "bad.jsonl"
    dataset = Flaky(length=3000, raising=_every(2, 3000, 1), none=(0,))  # 1501 bad
    many = loader(dataset=dataset, transform=None, batch_size=100, max_errors=1.0, error_log=str(path))
    assert len(flat_plain(collect(many))) == 1499
    stats = many.stats()
    assert stats.failed_samples == 1501 and len(stats.failures) == 1000
    assert len(log_lines(path)) == 1501
    assert sorted(line["index"] for line in log_lines(path)) == sorted((0, *_every(2, 3000, 1)))


def test_an_error_log_that_cannot_be_written_does_not_stop_the_run(tmp_path, caplog):
    (tmp_path / "a file").write_text("")
    unwritable = tmp_path / "a file" / "bad.jsonl"  # its folder is a file
    with caplog.at_level("WARNING", logger="dataloader"):
        logging = loader(error_log=str(unwritable))
        assert sorted(flat(collect(logging))) == GOOD
    assert logging.stats().failed_samples == len(BAD)
    assert "error log" in caplog.text


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here (every write to it: ENOSPC)")
@pytest.mark.parametrize("num_workers", [0, 2])
def test_an_error_log_on_a_full_device_warns_once_and_the_epochs_go_on(num_workers, caplog, no_leaks):
    """Writing to /dev/full fails with ENOSPC, as on a full disk: the close at the epoch's end
    (which flushes again) used to end the epoch with the raw OSError."""
    logging = loader(num_workers=num_workers, error_log="/dev/full")
    for _ in range(2):
        caplog.clear()
        with caplog.at_level("WARNING", logger="dataloader"):
            assert sorted(flat(collect(logging))) == GOOD
        assert logging.stats().failed_samples == len(BAD)
        assert sorted(r.index for r in logging.stats().failures) == sorted(BAD)
        warned = [r.getMessage() for r in caplog.records if "error log" in r.getMessage()]
        assert warned == [
            "the error log '/dev/full' cannot be written (ENOSPC: No space left on device); "
            "failed samples go on being counted"
        ]
    logging.close()


_FILL_THE_DISK = """
import sys
sys.path.insert(0, {root!r})
from tests.test_on_error import BAD, GOOD, Flaky, collect, flat, loader
log = {folder!r} + "/bad.jsonl"
with open({folder!r} + "/filler", "wb") as filler:  # leave less room than the log needs
    filler.write(b"x" * (64 * 1024 - 512))
logging = loader(dataset=Flaky(length=400, raising=range(1, 400, 2), none=()), transform=None,
                 max_errors=1.0, error_log=log)
good = flat(collect(logging))
print(len(good), logging.stats().failed_samples)
"""


def test_an_error_log_that_fills_a_tmpfs_mid_epoch_does_not_end_it(tmp_path):
    """A device that fills while the log is written (a 64 KiB tmpfs in a private mount
    namespace, over a folder of tmp_path): the epoch ends normally, every failure is counted, one
    warning is logged."""
    import shlex
    import shutil
    import subprocess
    import sys

    if shutil.which("unshare") is None:
        pytest.skip("unshare is not installed")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    folder, script = tmp_path / "full", tmp_path / "fill.py"
    folder.mkdir()  # not /mnt: the mount leaves with its namespace, a folder made outside it stays
    script.write_text(_FILL_THE_DISK.format(root=root, folder=str(folder)))
    command = (f"mount -t tmpfs -o size=64k tmpfs {shlex.quote(str(folder))} && "
               f"exec {shlex.quote(sys.executable)} {shlex.quote(str(script))}")
    done = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", command],
                          capture_output=True, text=True, timeout=120)
    if done.returncode != 0 and ("Operation not permitted" in done.stderr or "permission denied" in done.stderr.lower()):
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip().splitlines()[-1]}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["200", "200"]
    assert done.stderr.count("cannot be written") == 1 and "ENOSPC" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_the_error_log_can_be_named_by_the_environment(tmp_path, monkeypatch):
    path = tmp_path / "env.jsonl"
    monkeypatch.setenv("DATALOADER_ERROR_LOG", str(path))
    collect(loader("replace"))
    lines = log_lines(path)
    assert {line["index"] for line in lines if line["action"] == "replaced"} == BAD
    assert all({"index", "stage", "error", "action"} <= set(line) for line in lines)


def test_stats_count_the_failed_samples_and_keep_their_records():
    counted = loader()
    with iter(counted) as batches:
        for _ in batches:
            pass
        stats = batches.stats()
    assert stats.failed_samples == len(BAD)
    assert sorted(r.index for r in stats.failures) == sorted(BAD)
    assert "bad samples" in stats.table()
    assert "bad samples" in counted.stats().table()
    assert counted.stats().failed_samples == len(BAD)
    clean = loader(dataset=Flaky(raising=(), none=()), transform=None)
    collect(clean)
    assert clean.stats().failed_samples == 0 and "bad samples" not in clean.stats().table()


# -- resume -------------------------------------------------------------------------------------


def _resuming(on_error: str, num_workers: int) -> DataLoader:
    return loader(on_error, batch_size=5, num_workers=num_workers)


def _head_and_state(saving: DataLoader, taken: int) -> tuple[list, dict]:
    """The first ``taken`` batches of the run from epoch 0 on, and the state right after them."""
    head: list = []
    while True:
        if len(head) == taken:
            return head, json.loads(json.dumps(saving.state_dict()))
        with iter(saving) as batches:
            for batch in batches:
                head.append(owned(batch))
                if len(head) == taken:  # the state is taken with the epoch still open
                    return head, json.loads(json.dumps(saving.state_dict()))


@pytest.mark.parametrize("on_error", ["skip", "replace"])
def test_resume_under_skip_and_replace_gives_the_uninterrupted_run(on_error, no_leaks):
    uninterrupted = _resuming(on_error, 0)
    expected = collect(uninterrupted) + collect(uninterrupted)  # two epochs
    per_epoch = len(expected) // 2
    assert per_epoch >= 8
    for taken, resuming_workers in ((0, 2), (1, 0), (3, 2), (per_epoch - 1, 0), (per_epoch, 2), (per_epoch + 2, 0)):
        saving = _resuming(on_error, 2)
        head, state = _head_and_state(saving, taken)
        saving.close()
        resumed = _resuming(on_error, resuming_workers)
        resumed.load_state_dict(state)
        rest = []
        for _ in range(resumed.epoch, 2):
            rest.extend(collect(resumed))
        assert_same_batches(expected, head + rest)


def _property_loader(case: dict, side: dict) -> DataLoader:
    dataset = Flaky(case["size"], raising=case["raising"], none=case["none"])
    options = dict(num_workers=side["workers"], worker_type=side["type"], preload=side["preload"],
                   persistent_workers=side["persistent"] and side["workers"] > 0, prefetch_factor=side["prefetch"])
    return loader(case["on_error"], dataset=dataset, batch_size=case["batch_size"], drop_last=case["drop_last"],
                  transform=Noisy(bad=case["transform_bad"]), repeats=case["repeats"], in_order=case["in_order"],
                  max_errors=1000 if case["on_error"] != "raise" else None, **options)


def _property_run(built: DataLoader, epochs: int, save_at: int | None = None) -> tuple[list, dict | None, int]:
    """(epoch, values or "E") for every batch from ``built.epoch`` on; the state at point
    ``save_at`` (0: before the first epoch, then after each batch and each epoch's loop) ends
    the run there."""
    out: list = []
    point = 0

    def at_point() -> dict | None:
        nonlocal point
        point += 1
        return json.loads(json.dumps(built.state_dict())) if point - 1 == save_at else None

    state = at_point()
    for epoch in range(built.epoch, epochs):
        if state is not None:
            break
        with iter(built) as batches:
            for value in drain_lazily(batches):
                out.append((epoch, value))
                state = at_point()
                if state is not None:
                    break
        state = state if state is not None else at_point()
    return out, state, len(out)


def drain_lazily(batches):
    while True:
        try:
            yield tuple(np.asarray(next(batches)).tolist())
        except StopIteration:
            return
        except ValueError:
            yield "E"


_PROPERTY_SIDES = st.builds(
    lambda workers_type, **side: {"workers": workers_type[0], "type": workers_type[1], **side},
    workers_type=st.sampled_from([(0, "process")] * 3 + [(2, "thread"), (1, "thread"), (2, "process")]),
    preload=st.booleans(),
    persistent=st.booleans(),
    prefetch=st.sampled_from([1, 2]),
)


@st.composite
def _property_cases(draw) -> dict:
    size = draw(st.integers(1, 24))
    bad = draw(st.lists(st.integers(0, size - 1), unique=True, max_size=size))
    third = len(bad) // 3
    return {
        "size": size, "raising": tuple(bad[:third]), "none": tuple(bad[third:2 * third]),
        "transform_bad": tuple(bad[2 * third:]), "batch_size": draw(st.integers(1, 5)),
        "drop_last": draw(st.booleans()), "repeats": draw(st.sampled_from([1, 2])),
        "in_order": draw(st.booleans()), "on_error": draw(st.sampled_from(["skip", "replace", "raise"])),
    }


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_property_cases(), saving=_PROPERTY_SIDES, resuming=_PROPERTY_SIDES, data=st.data())
def test_resume_anywhere_under_any_on_error_gives_the_uninterrupted_run(case, saving, resuming, data):
    """The property of tests/test_resume.py with bad samples: for skip, replace and raise, a
    state taken anywhere in two epochs resumes (in other execution settings) with the rest."""
    serial = {"workers": 0, "type": "process", "preload": False, "persistent": False, "prefetch": 2}
    expected, _, _ = _property_run(_property_loader(case, serial), 2)
    save_at = data.draw(st.integers(0, len(expected) + 2), label="save_at")
    first = _property_loader(case, saving)
    head, state, _ = _property_run(first, 2, save_at)
    first.close()
    assert state is not None
    resumed = _property_loader(case, resuming)
    resumed.load_state_dict(state)
    rest, _, _ = _property_run(resumed, 2)
    resumed.close()
    if case["in_order"] or not (saving["workers"] or resuming["workers"]):
        assert head + rest == expected
    else:
        assert collections.Counter(head + rest) == collections.Counter(expected)


# -- hooks --------------------------------------------------------------------------------------


def test_a_hook_in_this_process_sees_every_sample_once():
    hook = Counting()
    dataset = Flaky(raising=(), none=())
    collect(loader(dataset=dataset, transform=Noisy(bad=()), hooks=[hook]))
    for stage in ("fetch", "transform", "collate"):
        keys = hook.keys("after", stage)
        assert sorted(keys) == list(range(SIZE)), stage
        assert sorted(hook.keys("before", stage)) == list(range(SIZE)), stage
    assert sum(len(e.indices) for k, e in hook.events if k == "after" and e.stage == "fetch") == SIZE
    assert not [e for _, e in hook.events if e.level == "sample"]


def test_a_hook_sees_each_bad_sample_fail_on_its_own():
    hook = Counting()
    collect(loader(hooks=[hook]))
    fetch_failed = hook.keys("failed", "fetch", "sample")
    assert sorted(fetch_failed) == sorted(RAISING)
    # Every key is seen once: in a batch that was read whole, or on its own.
    seen = hook.keys("after", "fetch") + hook.keys("after", "fetch", "sample") + fetch_failed
    assert sorted(seen) == list(range(SIZE))
    assert hook.keys("failed", "transform", "sample") == list(TRANSFORM_BAD)


def test_a_hook_in_worker_processes_sees_every_sample_once(tmp_path, no_leaks):
    path = str(tmp_path / "events.txt")
    dataset = Flaky(raising=(), none=())
    collect(loader(dataset=dataset, hooks=[AppendLines(path)], num_workers=2))
    with open(path) as file:
        lines = [line.split() for line in file]
    keys = [int(k) for line in lines for k in line[3].split(",")]
    assert sorted(keys) == list(range(SIZE))
    assert sorted(int(line[2]) for line in lines) == list(range(SIZE // 4))
    assert all(int(line[0]) != os.getpid() for line in lines)


def test_a_hook_runs_in_thread_workers_on_the_object_given(no_leaks):
    hook = Counting()
    collect(loader(dataset=Flaky(raising=(), none=()), hooks=[hook], num_workers=2, worker_type="thread"))
    assert sorted(hook.keys("after", "fetch")) == list(range(SIZE))


# -- an image folder with corrupt files ---------------------------------------------------------


def _image_folder(root) -> tuple[ImageFolder, list[int]]:
    """200 8x8 images in cat/ and dog/, three of them corrupt; returns the folder and their indices."""
    pytest.importorskip("PIL", reason="ImageFolder decodes with OpenCV or Pillow: pip install 'dataloader[vision]'")
    from dataloader._image_codec import encode_jpeg

    rng = np.random.default_rng(0)
    for index in range(197):
        folder = root / ("cat" if index % 2 else "dog")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{index:03d}.jpg").write_bytes(encode_jpeg(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)))
    data = encode_jpeg(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8))
    corrupt = {
        root / "cat" / "truncated.jpg": data[: len(data) // 2],
        root / "dog" / "empty.png": b"",
        root / "dog" / "notes.png": b"this is a text file, not an image\n",
    }
    for path, content in corrupt.items():
        path.write_bytes(content)
    dataset = ImageFolder(root)
    paths = [dataset.path(i) for i in range(len(dataset))]
    return dataset, sorted(paths.index(str(path)) for path in corrupt)


def test_an_image_folder_skips_its_corrupt_files(tmp_path, no_leaks):
    dataset, corrupt = _image_folder(tmp_path / "images")
    assert len(dataset) == 200 and len(dataset.classes) == 2
    log = tmp_path / "bad.jsonl"
    folder = DataLoader(dataset, batch_size=16, on_error="skip", num_workers=2, error_log=str(log),
                        multiprocessing_context=_FORK)
    images = labels = 0
    for image, label in folder:
        assert image.shape[1:] == (8, 8, 3) and image.dtype == np.uint8
        images += len(image)
        labels += len(label)
    assert images == labels == 197
    assert folder.stats().failed_samples == 3
    lines = log_lines(log)
    assert sorted(line["index"] for line in lines) == corrupt
    assert {line["error"] for line in lines} == {"ImageDecodeError"}
    assert {line["stage"] for line in lines} == {"fetch"}
    names = {os.path.basename(dataset.path(line["index"])) for line in lines}
    assert names == {"truncated.jpg", "empty.png", "notes.png"}


def test_an_image_folder_under_raise_fails_at_its_corrupt_files(tmp_path, no_leaks):
    dataset, corrupt = _image_folder(tmp_path / "images")
    folder = DataLoader(dataset, batch_size=16, num_workers=2, multiprocessing_context=_FORK)
    got = drain(iter(folder), errors=(OSError,), convert=lambda batch: len(batch[0]))
    assert got.count("E") == len({index // 16 for index in corrupt})
    assert len(got) == 13
    sizes = [16] * 12 + [8]
    failed = {index // 16 for index in corrupt}
    assert got == ["E" if number in failed else size for number, size in enumerate(sizes)]
