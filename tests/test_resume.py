"""Resume anywhere: ``DataLoader.state_dict()`` / ``load_state_dict()`` and ``loader.epoch``.

What is proven here:

- The property (hypothesis): for every dataset kind (a map dataset under a random, sequential
  or with-replacement sampler, an ``Infinite`` sampler with ``epoch_size``, a stream with and
  without its own ``state_dict``, a stream with ``epoch_size``, a ``CallableSource`` of samples
  or of chunked jobs), with or without a random transform drawing from ``batch_rng()``, the
  batches handed out before a state was taken followed by those of a fresh loader that loaded
  it (through ``json``), and again after a second save and restore, are the batches of one
  uninterrupted run: the same list, or, where ``in_order=False`` lets workers hand batches out
  in any order, the same multiset per epoch. The state may be taken before the first batch,
  after any batch (the last of an epoch included), after an epoch's loop, or right after a
  restore, and the worker count and type, ``in_order``, ``preload``, ``buffer_size``,
  ``prefetch_factor`` and ``persistent_workers`` may differ between the runs. Taking a state
  never changes the run that took it.
- A state right after ``load_state_dict()`` is the loaded one; a state after an epoch's last
  batch resumes at the next epoch's start; ``load_state_dict()`` with an iterator open is a
  ``RuntimeError``; ``set_epoch`` against the loaded epoch is an error naming ``loader.epoch``.
- A state refuses, naming the field, a loader that would place its batches elsewhere: another
  dataset length, batch size, seed, world size or rank, repeats, epoch size, drop_last, source
  kind or ``parallel_stream`` worker count; and a value that is no state at all.
- A stream without ``state_dict()`` resumes mid-epoch only with ``skip_ahead=True``; a sampler
  without it warns (``ResumeWarning``) and skips ahead; ``parallel_stream`` resumes with
  ``skip_ahead`` and the same worker count.
- The state is plain JSON values (no NumPy), survives ``torch.save``, carries a map dataset's
  own ``state_dict()``, and batches made ahead of the consumer are not lost.
"""

from __future__ import annotations

import collections
import functools
import json
import multiprocessing
import operator
import time
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import dataloader
from dataloader import (
    ArrayDataset,
    CallableSource,
    DataLoader,
    Dataset,
    Infinite,
    RandomSampler,
    ReplacementSampler,
    SequentialSampler,
    StreamDataset,
    StreamSampler,
    batch_rng,
)
from dataloader.errors import ArgumentTypeError, ArgumentValueError
from dataloader.transform import Transform

# num_workers="auto" sides resize their pools after every batch (see the fixture).
pytestmark = pytest.mark.usefixtures("tuned_every_batch")

# Process workers in the property test: fork where the platform has it (cheapest to start).
_FORK = "fork" if "fork" in multiprocessing.get_all_start_methods() else None


# -- datasets, sources and a random transform (module level: process workers unpickle them) --


class _Noise(Transform):
    """A random augmentation drawn from ``batch_rng()``: the same for a batch in any run."""

    def apply(self, sample):
        value = sample[0] if isinstance(sample, tuple) else sample
        return np.int64(value) * 1000 + batch_rng().integers(0, 1000)


class _Stream(StreamDataset):
    """Samples that differ by epoch, with the position hooks: ``state_dict()`` is where the
    iterator ``__iter__`` returned last stands, ``load_state_dict`` starts the next one there."""

    def __init__(self, length: int) -> None:
        self.length = length
        self.epoch = 0
        self._start = 0
        self._at = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self):
        start, self._start = self._start, 0
        self._at = start
        return self._read(start)

    def _read(self, start: int):
        for i in range(start, self.length):
            self._at = i + 1
            yield (i * 7 + self.epoch * 3) % 1000

    def state_dict(self) -> dict:
        return {"at": self._at}

    def load_state_dict(self, state: dict) -> None:
        self._start = state["at"]


class _PlainStream(StreamDataset):
    """A stream without position hooks, the same samples each time it is read."""

    def __init__(self, length: int) -> None:
        self.length = length

    def __iter__(self):
        return iter(range(100, 100 + self.length))


class _Counter:
    """A callable source's ``data_source``: consecutive numbers, with its own state."""

    def __init__(self, jobs: bool = False) -> None:
        self.next = 0
        self.jobs = jobs

    def __call__(self, batch_size: int) -> list:
        values = range(self.next, self.next + batch_size)
        self.next += batch_size
        if self.jobs:  # work for the workers: each job makes a sample
            return [functools.partial(operator.mul, value, 10) for value in values]
        return list(values)

    def state_dict(self) -> dict:
        return {"next": self.next}

    def load_state_dict(self, state: dict) -> None:
        self.next = state["next"]


class _Remembering(Dataset):
    """A map dataset with its own state (say, a curriculum level) that scales its samples."""

    def __init__(self, length: int) -> None:
        self.length = length
        self.level = 1

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        return np.int64(index * self.level)

    def state_dict(self) -> dict:
        return {"level": self.level}

    def load_state_dict(self, state: dict) -> None:
        self.level = state["level"]


# -- building and running loaders ---------------------------------------------------------------

_KINDS = ["random", "sequential", "replacement", "infinite", "stream", "plain_stream", "stream_epochs",
          "callable", "callable_jobs"]


def _build(case: dict, side: dict) -> DataLoader:
    """The loader of ``case`` (what decides the batches) with ``side``'s execution settings."""
    kind, size, batch_size = case["kind"], case["size"], case["batch_size"]
    options = dict(
        seed=3, repeats=case["repeats"], in_order=case["in_order"], timeout=case["timeout"],
        transform=_Noise() if case["noise"] else None, num_workers=side["workers"],
        worker_type=side["type"], prefetch_factor=side["prefetch"], preload=side["preload"],
        buffer_size=side["buffer"], persistent_workers=side["persistent"] and side["workers"] != 0,
    )
    if side["workers"] and side["type"] == "process":
        options["multiprocessing_context"] = _FORK
    if kind in ("random", "sequential", "replacement", "infinite"):
        data = ArrayDataset(np.arange(size))
        drop_last = case["drop_last"] and kind != "infinite"
        if kind == "sequential":
            sampler = SequentialSampler(data, batch_size=batch_size, drop_last=drop_last)
        elif kind == "replacement":
            sampler = ReplacementSampler(data, batch_size=batch_size, drop_last=drop_last, seed=1)
        else:
            sampler = RandomSampler(data, batch_size=batch_size, drop_last=drop_last, seed=1)
        if kind == "infinite":
            return DataLoader(data, Infinite(sampler), epoch_size=case["epoch_size"], **options)
        return DataLoader(data, sampler, **options)
    if kind in ("callable", "callable_jobs"):
        jobs = kind == "callable_jobs"
        source = CallableSource(_Counter(jobs), chunk_size=1 if jobs and batch_size > 1 else None)
        return DataLoader(source, StreamSampler(batch_size), epoch_size=case["epoch_size"], **options)
    stream = _PlainStream(size) if kind == "plain_stream" else _Stream(size)
    epoch_size = case["epoch_size"] if kind == "stream_epochs" else None
    return DataLoader(stream, StreamSampler(batch_size), epoch_size=epoch_size, **options)


def _values(batch) -> tuple:
    """A batch as plain ints (a tuple of one array for ArrayDataset, an array otherwise)."""
    return tuple(np.asarray(batch).ravel().tolist())


def _run(loader: DataLoader, epochs: int, save_at: int | None = None, stop: bool = False):
    """Iterate the epochs from ``loader.epoch`` to ``epochs``. Returns the batches as (epoch,
    values), the state taken at point ``save_at`` (0: before the first epoch, then one point
    after each batch and one after each epoch's loop) and how many batches came before it.
    ``stop``: end the run right after the save."""
    out: list = []
    saved: list = [None, None]
    point = 0

    def at_point() -> bool:
        nonlocal point
        if point == save_at:
            saved[:] = [loader.state_dict(), len(out)]
        point += 1
        return stop and point > save_at

    if not at_point():
        for epoch in range(loader.epoch, epochs):
            with iter(loader) as batches:
                for batch in batches:
                    out.append((epoch, _values(batch)))
                    if at_point():
                        return out, *saved
            if at_point():
                break
    return out, *saved


def _points(batches: int, epochs: int) -> int:
    """How many save points a run of ``batches`` over ``epochs`` epochs has (see :func:`_run`)."""
    return 1 + batches + epochs


def _restored(case: dict, side: dict, state: dict) -> DataLoader:
    loader = _build(case, side)
    if isinstance(loader.dataset, CallableSource):
        # A source in a fresh process may stand anywhere: the restore must put it in place.
        loader.dataset.data_source.next = 10**6
    loader.load_state_dict(json.loads(json.dumps(state)), skip_ahead=case["kind"] == "plain_stream")
    assert loader.epoch == state["epoch"]
    return loader


def _assert_same_run(got: list, expected: list, exact: bool) -> None:
    if exact:
        assert got == expected
    else:  # the same batches in each epoch, in any order
        assert collections.Counter(got) == collections.Counter(expected)


# -- the property -------------------------------------------------------------------------------



# Mostly no workers or thread workers (cheap); process workers now and then.
_SIDES = st.builds(
    lambda workers_type, **side: {"workers": workers_type[0], "type": workers_type[1], **side},
    workers_type=st.sampled_from(
        [(0, "process")] * 4 + [(1, "thread"), (2, "thread"), (2, "thread"), (4, "thread")]
        + [(1, "process"), (2, "process"), ("auto", "thread"), ("auto", "process")]
    ),
    prefetch=st.sampled_from([1, 2, 4]),
    preload=st.booleans(),
    buffer=st.sampled_from([0, 0, 1, 3]),
    persistent=st.booleans(),
)

_CASES = st.fixed_dictionaries({
    "kind": st.sampled_from(_KINDS),
    "size": st.integers(1, 40),
    "batch_size": st.integers(1, 6),
    "drop_last": st.booleans(),
    "epoch_size": st.integers(1, 6),
    "repeats": st.sampled_from([1, 2]),
    "in_order": st.booleans(),
    "noise": st.booleans(),
    "timeout": st.sampled_from([0, 0, 10]),
    "epochs": st.integers(2, 3),
})

_SERIAL = {"workers": 0, "type": "process", "prefetch": 2, "preload": False, "buffer": 0,
           "persistent": False}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_CASES, first=_SIDES, second=_SIDES, third=_SIDES, data=st.data())
def test_save_and_restore_anywhere_gives_the_uninterrupted_run(case, first, second, third, data):
    epochs = case["epochs"]
    event(f"kind {case['kind']}")
    event(f"workers {[(side['workers'], side['type']) for side in (first, second, third)]}")
    expected, _, _ = _run(_build(case, _SERIAL), epochs)
    exact = case["in_order"] or not (first["workers"] or second["workers"] or third["workers"])

    # First save: any point of the run; the saving run sometimes carries on to its end.
    save_at = data.draw(st.integers(0, _points(len(expected), epochs) - 1), label="save_at")
    carry_on = data.draw(st.booleans(), label="carry_on")
    saving = _build(case, first)
    before, state, done = _run(saving, epochs, save_at, stop=not carry_on)
    saving.close()
    if carry_on:  # taking a state changed nothing
        _assert_same_run(before, expected, case["in_order"] or not first["workers"])
    assert state is not None and state["format"] == "dataloader.state/3"
    before = before[:done]

    # Second save in the restored run, right after the restore (point 0) or anywhere later.
    restored = _restored(case, second, state)
    left = _points(len(expected) - done, epochs - state["epoch"])
    again_at = data.draw(st.integers(0, left - 1), label="again_at")
    middle, again, _ = _run(restored, epochs, again_at, stop=True)
    restored.close()
    assert again is not None
    if again_at == 0:
        assert again == state  # a state right after a restore is the restored one

    rest, _, _ = _run(_restored(case, third, again), epochs)
    _assert_same_run(before + middle + rest, expected, exact)


# -- specific behaviour -------------------------------------------------------------------------


def _map_loader(num_workers: int = 0, size: int = 40, batch_size: int = 4, **options) -> DataLoader:
    data = ArrayDataset(np.arange(size))
    options = {"seed": 3, "transform": _Noise(), **options}
    if num_workers and options.get("worker_type", "process") == "process":
        options.setdefault("multiprocessing_context", _FORK)
    sampler = RandomSampler(data, batch_size=batch_size, seed=1)
    return DataLoader(data, sampler, num_workers=num_workers, **options)


def _take(loader: DataLoader, count: int) -> tuple[list, dict]:
    """The next ``count`` batches of the loader's next epoch, and the state after them."""
    with iter(loader) as batches:
        got = [_values(next(batches)) for _ in range(count)]
        return got, loader.state_dict()


def _epochs(loader: DataLoader, stop: int) -> list:
    """Every batch of the epochs from ``loader.epoch`` to ``stop`` (exclusive), as (epoch, values)."""
    return _run(loader, stop)[0]


def _plain(value) -> bool:
    """True if ``value`` is made of JSON's own types only (no NumPy scalar or array, no tuple)."""
    if isinstance(value, dict):
        return all(isinstance(key, str) and _plain(item) for key, item in value.items())
    if isinstance(value, list):
        return all(_plain(item) for item in value)
    return value is None or type(value) in (bool, int, float, str)


def test_resume_twice_within_one_epoch_stays_aligned():
    expected = [values for _, values in _epochs(_map_loader(), 1)]
    head, state = _take(_map_loader(), 3)
    restored = _map_loader(num_workers=2, worker_type="thread")
    restored.load_state_dict(json.loads(json.dumps(state)))
    middle, again = _take(restored, 4)
    assert (again["epoch"], again["low"], again["count"]) == (0, 7, 7)
    last = _map_loader(num_workers=1, worker_type="thread")
    last.load_state_dict(json.loads(json.dumps(again)))
    rest = [values for _, values in _epochs(last, 1)]
    assert head + middle + rest == expected
    assert len(rest) == len(expected) - 7


def test_a_loader_that_ran_on_can_be_put_back_to_an_earlier_state(no_leaks):
    """The same loader, persistent process workers and all, rewinds to a state it took."""
    loader = _map_loader(num_workers=2, persistent_workers=True, size=24)
    expected = _epochs(_map_loader(size=24), 2)
    first, state = _take(loader, 2)
    _epochs(loader, 2)  # epoch 1 (closing the iterator ended epoch 0)
    assert loader.epoch == 2
    loader.load_state_dict(state)
    assert loader.epoch == 0
    assert [(0, values) for values in first] + _epochs(loader, 2) == expected
    loader.close()


def test_a_state_right_after_restore_is_the_loaded_one_and_complete():
    expected = [values for _, values in _epochs(_map_loader(), 1)]
    _, state = _take(_map_loader(), 5)
    restored = _map_loader()
    restored.load_state_dict(json.loads(json.dumps(state)))
    assert restored.state_dict() == state
    with iter(restored) as batches:  # opened, before any batch: still the same place
        assert restored.state_dict() == state
        assert _values(next(batches)) == expected[5]
        assert restored.state_dict()["low"] == 6
    # The state taken right after a restore is itself a state to resume from.
    again = _map_loader(num_workers=2, worker_type="thread")
    again.load_state_dict(state)
    chained = _map_loader()
    chained.load_state_dict(again.state_dict())
    assert [values for _, values in _epochs(chained, 1)] == expected[5:]


@pytest.mark.parametrize("where", ["after the last batch", "after the epoch's loop"])
@pytest.mark.parametrize("kind", ["map", "epoch_size"])
def test_a_state_after_an_epochs_last_batch_resumes_at_the_next_epochs_start(kind, where):
    def make(num_workers=0):
        if kind == "map":
            return _map_loader(num_workers, size=10, batch_size=3, worker_type="thread")
        data = ArrayDataset(np.arange(10))
        return DataLoader(data, Infinite(RandomSampler(data, batch_size=3, seed=1)), epoch_size=5,
                          transform=_Noise(), seed=3, num_workers=num_workers, worker_type="thread")

    expected = _epochs(make(), 3)
    per_epoch = len(expected) // 3
    loader = make(num_workers=2)
    with iter(loader) as batches:
        for _ in range(per_epoch):
            next(batches)
        if where == "after the last batch":  # the epoch's iterator is still open
            state = loader.state_dict()
        else:
            assert list(batches) == []
    if where == "after the epoch's loop":
        state = loader.state_dict()
    position = (state["epoch"], state["low"], state["above"], state["count"], state["partial"])
    assert position == (1, 0, [], 0, [])
    restored = make(num_workers=1)
    restored.load_state_dict(json.loads(json.dumps(state)))
    assert restored.epoch == 1
    # Epoch 1 in full, then epoch 2: no epoch dropped or repeated.
    assert _epochs(restored, 3) == expected[per_epoch:]


def test_a_state_after_a_streams_last_batch_resumes_without_dropping_an_epoch():
    """A stream's end is known only once read past: the state stays in the epoch, which
    resumes empty."""
    def make():
        return DataLoader(_Stream(9), StreamSampler(3), transform=_Noise(), seed=3)

    expected = _epochs(make(), 3)
    loader = make()
    with iter(loader) as batches:
        for _ in range(3):
            next(batches)
        state = loader.state_dict()
    assert (state["epoch"], state["low"]) == (0, 3)
    restored = make()
    restored.load_state_dict(json.loads(json.dumps(state)))
    assert expected[:3] + _epochs(restored, 3) == expected


def test_loader_epoch_counts_epochs_and_is_read_only():
    loader = _map_loader(size=8)
    assert loader.epoch == 0
    _epochs(loader, 1)
    assert loader.epoch == 1
    loader.set_epoch(4)
    assert loader.epoch == 4 and loader.state_dict()["epoch"] == 4
    with pytest.raises(AttributeError):
        loader.epoch = 2


def test_load_state_dict_with_an_iterator_open_ends_it_and_the_next_iter_resumes():
    """As torchdata's StatefulDataLoader: the open epoch is superseded (its next ``next()`` says
    by what) and the next ``iter(loader)`` runs the loaded state."""
    loader = _map_loader()
    head, state = _take(_map_loader(), 2)
    batches = iter(loader)
    next(batches)
    loader.load_state_dict(state)
    with pytest.raises(dataloader.DataLoaderError, match=r"ended by loader\.load_state_dict\(\)"):
        next(batches)
    assert loader.epoch == 0
    assert head + [_values(b) for b in loader] == [_values(b) for b in _map_loader()]


def test_set_epoch_against_the_loaded_state_is_an_error_naming_loader_epoch():
    loader = _map_loader(size=8)
    _epochs(loader, 2)
    state = loader.state_dict()
    assert state["epoch"] == 2
    restored = _map_loader(size=8)
    restored.load_state_dict(state)
    with pytest.raises(ArgumentValueError, match=r"loader\.epoch"):
        restored.set_epoch(5)
    restored.set_epoch(2)  # the epoch the state resumes: allowed, and changes nothing
    assert restored.epoch == 2
    assert _epochs(restored, 3) == _epochs(_map_loader(size=8), 3)[-2:]


# -- a state refuses another loader, naming the field -------------------------------------------


def _state_of(loader: DataLoader, batches: int = 1) -> dict:
    state = _take(loader, batches)[1]
    loader.close()
    return json.loads(json.dumps(state))


def _sharded(num_workers: int, **options) -> DataLoader:
    return DataLoader(_ShardedStream(30), StreamSampler(2), num_workers=num_workers,
                      parallel_stream=True, multiprocessing_context=_FORK, seed=3, **options)


class _ShardedStream(StreamDataset):
    """Worker ``w`` of ``n`` reads ``range(w, length, n)``; the main process reads it all."""

    def __init__(self, length: int) -> None:
        self.length = length

    def __iter__(self):
        info = dataloader.get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(range(start, self.length, step))


def _with_sampler(size: int = 40, **sampler_options):
    def make():
        data = ArrayDataset(np.arange(size))
        sampler = RandomSampler(data, **{"batch_size": 4, "seed": 1, **sampler_options})
        return DataLoader(data, sampler, seed=3)
    return make


# The world size, rank and batch size of a map dataset's loader may differ: the epoch is
# reshaped for the new world (tests/test_elastic_map.py).
_MISMATCHES = {
    "length": (_with_sampler(40), _with_sampler(44)),
    "drop_last": (_with_sampler(drop_last=False), _with_sampler(drop_last=True)),
    "seed": (lambda: _map_loader(seed=3), lambda: _map_loader(seed=4)),
    "repeats": (lambda: _map_loader(repeats=2), lambda: _map_loader(repeats=1)),
    "epoch_size": (lambda: _map_loader(epoch_size=5), lambda: _map_loader(epoch_size=6)),
    "source": (lambda: _map_loader(), lambda: DataLoader(_Stream(40), StreamSampler(4), seed=3)),
    "stream_workers": (lambda: _sharded(2), lambda: _sharded(3)),
}


@pytest.mark.parametrize("field", list(_MISMATCHES))
def test_a_state_refuses_a_loader_that_differs_naming_the_field(no_leaks, field):
    saving, other = _MISMATCHES[field]
    state = _state_of(saving())
    assert state["config"][field] is not None
    loader = other()
    with pytest.raises(ArgumentValueError, match=rf"{field}=") as error:
        loader.load_state_dict(state, skip_ahead=True)
    assert "Build the loader as the one that saved the state" in str(error.value)
    assert loader.epoch == 0 and loader.state_dict()["low"] == 0  # nothing changed
    loader.close()
    same = saving()
    same.load_state_dict(state, skip_ahead=True)  # the saving loader's twin takes it
    same.close()


def test_a_sampler_with_another_seed_is_refused_before_any_batch():
    """The sampler checks its own state (here its seed) when the restored epoch starts."""
    state = _state_of(_with_sampler(seed=1)(), 2)
    loader = _with_sampler(seed=2)()
    with pytest.raises(ArgumentValueError, match="seed=1"):
        loader.load_state_dict(state)
        next(iter(loader))


@pytest.mark.parametrize("state, error, words", [
    ([1, 2], ArgumentTypeError, "must be the dict"),
    ({"epoch": 0}, ArgumentValueError, "format None"),
    ({"format": "dataloader.state/0"}, ArgumentValueError, "dataloader.state/3"),
])
def test_what_is_not_a_state_is_refused(state, error, words):
    with pytest.raises(error, match=words):
        _map_loader().load_state_dict(state)


# -- streams, samplers and sources without position hooks ---------------------------------------


def _plain_stream(**options) -> DataLoader:
    return DataLoader(_PlainStream(30), StreamSampler(4), transform=_Noise(), seed=3, **options)


def test_a_stream_without_state_dict_resumes_mid_epoch_only_with_skip_ahead():
    expected = _epochs(_plain_stream(), 2)
    state = _state_of(_plain_stream(), 3)
    with pytest.raises(ArgumentValueError) as error:
        _plain_stream().load_state_dict(state)
    message = str(error.value)
    assert "state_dict()/load_state_dict()" in message and "skip_ahead=True" in message
    restored = _plain_stream(num_workers=2, worker_type="thread")
    restored.load_state_dict(state, skip_ahead=True)
    assert expected[:3] + _epochs(restored, 2) == expected


def test_a_stream_without_state_dict_resumes_at_an_epoch_start_without_skip_ahead():
    loader = _plain_stream()
    _epochs(loader, 1)
    state = loader.state_dict()
    assert (state["epoch"], state["low"]) == (1, 0)
    restored = _plain_stream()
    restored.load_state_dict(state)  # nothing to re-read: no skip_ahead needed
    expected = _epochs(_plain_stream(), 2)
    assert _epochs(restored, 2) == [batch for batch in expected if batch[0] == 1]


def test_a_callable_source_without_state_dict_resumes_only_with_skip_ahead():
    def make(**options):
        counter = _Counter()  # its state hooks hidden behind a plain function
        source = CallableSource(lambda size: counter(size))
        return DataLoader(source, StreamSampler(3), epoch_size=4, seed=3, transform=_Noise(), **options)

    expected = _epochs(make(), 2)
    state = _state_of(make(), 2)
    with pytest.raises(ArgumentValueError, match="skip_ahead=True"):
        make().load_state_dict(state)
    restored = make(num_workers=2, worker_type="thread")
    restored.load_state_dict(state, skip_ahead=True)
    assert expected[:2] + _epochs(restored, 2) == expected


class _EpochSampler:
    """A user's batch sampler without state hooks whose order depends on the epoch alone
    (PyTorch's DistributedSampler habit: the training loop calls ``set_epoch`` each epoch)."""

    def __init__(self, size: int, batch_size: int) -> None:
        self.size, self.batch_size, self.epoch = size, batch_size, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self):
        order = self._rng().permutation(self.size).tolist()
        return iter([order[i : i + self.batch_size] for i in range(0, self.size, self.batch_size)])

    def __len__(self) -> int:
        return -(-self.size // self.batch_size)

    def _rng(self) -> np.random.Generator:
        return np.random.default_rng([7, self.epoch])


class _FixedSampler(_EpochSampler):
    """The same shuffled order every epoch, without state hooks."""

    def _rng(self) -> np.random.Generator:
        return np.random.default_rng(7)


def _train(loader: DataLoader, stop: int, save_after: int | None = None) -> tuple[list, dict | None]:
    """A training loop that calls ``loader.set_epoch`` before each epoch, from ``loader.epoch``."""
    got, state = [], None
    for epoch in range(loader.epoch, stop):
        loader.set_epoch(epoch)
        with iter(loader) as batches:
            for batch in batches:
                got.append((epoch, _values(batch)))
                if len(got) == save_after:
                    return got, loader.state_dict()
    return got, state


@pytest.mark.parametrize("sampler", [_FixedSampler, _EpochSampler])
def test_a_sampler_without_state_dict_warns_and_skips_ahead(sampler):
    """Exact for a sampler whose order is a function of the epoch (told by ``set_epoch``)."""
    def make(**options):
        data = ArrayDataset(np.arange(20))
        return DataLoader(data, sampler(20, 3), transform=_Noise(), seed=3, **options)

    expected, _ = _train(make(), 3)
    head, state = _train(make(), 3, save_after=10)  # epoch 1, batch 3
    assert (state["epoch"], state["low"]) == (1, 3)
    restored = make(num_workers=2, worker_type="thread")
    with pytest.warns(dataloader.ResumeWarning, match="no state_dict"):
        restored.load_state_dict(json.loads(json.dumps(state)))
    rest, _ = _train(restored, 3)
    assert head + rest == expected


# -- parallel_stream ----------------------------------------------------------------------------


def test_parallel_stream_resumes_with_skip_ahead_and_the_same_workers(no_leaks):
    full = [values for _, values in _epochs(_sharded(2), 1)]
    loader = _sharded(2)
    head, state = _take(loader, 5)
    loader.close()
    assert sum(int(n) for n in state["workers"].values()) == 5
    with pytest.raises(ArgumentValueError, match="skip_ahead=True"):
        _sharded(2).load_state_dict(state)
    restored = _sharded(2, worker_type="thread")
    restored.load_state_dict(json.loads(json.dumps(state)), skip_ahead=True)
    rest = [values for _, values in _epochs(restored, 1)]
    assert collections.Counter(head + rest) == collections.Counter(full)
    assert sorted(v for batch in head + rest for v in batch) == list(range(30))


def test_parallel_stream_with_epoch_size_cannot_resume():
    def make():
        return DataLoader(_ShardedStream(30), StreamSampler(2), num_workers=2, parallel_stream=True,
                          worker_type="thread", epoch_size=4, seed=3)

    state = _state_of(make(), 2)
    with pytest.raises(ArgumentValueError, match="epoch_size with parallel_stream=True cannot resume"):
        make().load_state_dict(state, skip_ahead=True)


# -- what a state is made of --------------------------------------------------------------------


def test_every_kinds_state_is_plain_json_values(no_leaks):
    for kind in _KINDS:
        case = {"kind": kind, "size": 30, "batch_size": 4, "drop_last": False, "epoch_size": 5,
                "repeats": 2, "in_order": False, "noise": True, "timeout": 0, "epochs": 2}
        side = {**_SERIAL, "workers": 2, "type": "thread"}
        loader = _build(case, side)
        for state in (loader.state_dict(), _state_of(loader, 3)):
            assert _plain(state), (kind, state)
            assert json.loads(json.dumps(state)) == state
    assert _plain(_state_of(_sharded(2), 3))


def test_torch_save_and_load_keep_the_state_exact(no_leaks, tmp_path):
    torch = pytest.importorskip("torch", reason="torch.save round trip needs torch installed")
    expected = _epochs(_map_loader(), 2)
    head, state = _take(_map_loader(), 4)
    torch.save({"loader": state, "step": 4}, tmp_path / "checkpoint.pt")
    loaded = torch.load(tmp_path / "checkpoint.pt", weights_only=True)  # plain values only
    assert loaded["loader"] == state
    restored = _map_loader(num_workers=2)
    restored.load_state_dict(loaded["loader"])
    assert [(0, values) for values in head] + _epochs(restored, 2) == expected


def test_a_map_datasets_own_state_is_saved_and_restored(no_leaks):
    def make(num_workers=0, **options):
        data = _Remembering(12)
        return DataLoader(data, SequentialSampler(data, batch_size=4), num_workers=num_workers,
                          multiprocessing_context=_FORK, **options)

    saving = make()
    saving.dataset.level = 3
    head, state = _take(saving, 1)
    assert state["dataset"] == {"level": 3}
    restored = make(num_workers=2, persistent_workers=True)
    _epochs(restored, 1)  # its persistent workers hold a dataset of level 1
    restored.load_state_dict(json.loads(json.dumps(state)))
    assert restored.dataset.level == 3
    rest = [values for _, values in _epochs(restored, 1)]
    assert head + rest == [(0, 3, 6, 9), (12, 15, 18, 21), (24, 27, 30, 33)]
    restored.close()


class _Counted(Dataset):
    """Sample ``i`` is ``i``; counts the samples made (thread workers share the count)."""

    def __init__(self, length: int) -> None:
        self.length = length
        self.made = 0

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        self.made += 1
        return np.int64(index)


def test_batches_made_ahead_are_not_lost(no_leaks):
    def make(**options):
        data = _Counted(80)
        sampler = RandomSampler(data, batch_size=2, seed=1)
        return DataLoader(data, sampler, transform=_Noise(), seed=3, **options)

    expected = _epochs(make(), 1)
    loader = make(num_workers=2, worker_type="thread", prefetch_factor=4, preload=True, buffer_size=4)
    with iter(loader) as batches:
        head = [(0, _values(next(batches)))]
        deadline = time.monotonic() + 10
        while loader.dataset.made < 2 * 8 and time.monotonic() < deadline:  # 8 batches made ahead
            time.sleep(0.01)
        assert loader.dataset.made >= 2 * 8, "the workers did not run ahead"
        state = loader.state_dict()
    assert (state["low"], state["count"], state["above"]) == (1, 1, [])
    restored = make(num_workers=2, prefetch_factor=4, preload=True, buffer_size=4,
                    multiprocessing_context=_FORK)
    restored.load_state_dict(json.loads(json.dumps(state)))
    assert head + _epochs(restored, 1) == expected


# -- batches handed out of order and echoes across a restore ------------------------------------


class _LateZero(Transform):
    """Holds back the sample 0 (the first batch's, with batch_size 1), so that thread workers
    with ``in_order=False`` hand out the second batch first."""

    def apply(self, sample):
        value = int(np.asarray(sample).ravel()[0])
        if value == 0:
            time.sleep(0.3)
        return np.int64(value)


def _late_loader(kind: str, num_workers: int = 0, **options) -> DataLoader:
    options = dict(transform=_LateZero(), in_order=False, seed=3, num_workers=num_workers,
                   worker_type="thread", **options)
    if kind == "map":
        data = ArrayDataset(np.arange(3))
        return DataLoader(data, SequentialSampler(data, batch_size=1), **options)
    if kind == "infinite":
        data = ArrayDataset(np.arange(5))
        return DataLoader(data, Infinite(SequentialSampler(data, batch_size=1)), epoch_size=3, **options)
    if kind == "callable":
        return DataLoader(CallableSource(_Counter()), StreamSampler(1), epoch_size=4, **options)
    epoch_size = 3 if kind == "stream_epochs" else None
    return DataLoader(_Stream(4), StreamSampler(1), epoch_size=epoch_size, **options)


def _second_batch_first(kind: str, **options) -> tuple[list, dict]:
    """The first batch handed out by two thread workers (batch 1, batch 0 held back), and the
    state after it."""
    head, state = _take(_late_loader(kind, num_workers=2, **options), 1)
    assert (state["low"], state["above"]) == (0, [1]), f"batch 1 was not handed out first: {state}"
    return [(0, values) for values in head], state


@pytest.mark.parametrize("kind", ["stream", "stream_epochs", "infinite", "callable"])
def test_a_state_taken_where_a_restored_epoch_closes_a_gap_resumes_exactly(kind):
    """A state with batch 1 handed out before batch 0; restored, batch 0 is handed out and
    ``low`` jumps over batch 1; a state taken then must still place the rest."""
    expected = _epochs(_late_loader(kind), 2)
    head, state = _second_batch_first(kind)
    restored = _late_loader(kind)
    restored.load_state_dict(json.loads(json.dumps(state)))
    middle, again = _take(restored, 1)
    assert again["low"] in (0, 2), again  # 0: the epoch ended, the next one begins
    last = _late_loader(kind)
    last.load_state_dict(json.loads(json.dumps(again)))
    got = head + [(0, values) for values in middle] + _epochs(last, 2)
    assert collections.Counter(got) == collections.Counter(expected)


def test_a_restored_half_echoed_batch_and_another_half_echoed_one_are_both_kept():
    """in_order=False with repeats: the restored run may half echo another batch before the
    restored half-echoed one comes again; a state then holds two half-echoed batches."""
    expected = _epochs(_late_loader("map", repeats=2), 1)
    first, state = _take(_late_loader("map", repeats=2), 1)  # batch 0 echoed once, serially
    assert state["partial"] == [[0, 1, -1]]
    restored = _late_loader("map", num_workers=2, repeats=2)
    restored.load_state_dict(json.loads(json.dumps(state)))
    middle, again = _take(restored, 1)
    assert middle == [(1,)], "batch 1 was not handed out first"
    last = _late_loader("map", repeats=2)
    last.load_state_dict(json.loads(json.dumps(again)))
    got = [(0, values) for values in first + middle] + _epochs(last, 1)
    assert collections.Counter(got) == collections.Counter(expected)  # each batch twice


class _CountedCounter(_Counter):
    """A :class:`_Counter` that counts its calls and the states it was given."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0
        self.loaded: list = []

    def __call__(self, batch_size: int) -> list:
        self.calls += 1
        return super().__call__(batch_size)

    def load_state_dict(self, state: dict) -> None:
        self.loaded.append(state)
        super().load_state_dict(state)


@pytest.mark.parametrize("epoch_size", [None, 4])
def test_a_callable_source_with_state_dict_is_restored_not_called_again(epoch_size):
    def make():
        source = CallableSource(_CountedCounter())
        return DataLoader(source, StreamSampler(3), epoch_size=epoch_size, seed=3)

    _, state = _take(make(), 3)
    restored = make()
    source = restored.dataset.data_source
    source.next = 1000  # a fresh process's source stands anywhere until restored
    restored.load_state_dict(json.loads(json.dumps(state)))
    with iter(restored) as batches:
        assert _values(next(batches)) == (9, 10, 11)
    assert source.loaded == [{"next": 9}]
    assert source.calls == 1  # the three batches handed out are not made again


def test_a_state_after_a_break_resumes_the_rest_of_the_interrupted_epoch():
    """A ``break`` drops the epoch's iterator; a state taken after it still describes where the
    user stopped (as torchdata's does), while the loader's own next iter() runs the next epoch.
    After an epoch that ran out, the state is the next epoch's start, with no warning."""
    loader = _map_loader()
    for count, _ in enumerate(loader, 1):
        if count == 3:
            inside = loader.state_dict()
            break
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        after = loader.state_dict()
    assert after == inside and (after["epoch"], after["low"]) == (0, 3)
    rest = _map_loader()
    rest.load_state_dict(after)
    assert len([batch for batch in rest]) == 7  # the rest of epoch 0
    assert loader.epoch == 1
    for _ in loader:  # the loader itself goes on with epoch 1
        pass
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert loader.state_dict()["epoch"] == 2
