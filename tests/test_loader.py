import math
import pickle
import random
import threading
import time

import numpy as np
import pytest

from dataloader import (
    ArrayDataset,
    Collator,
    DataLoader,
    Dataset,
    Infinite,
    RandomSampler,
    SequentialSampler,
    StreamDataset,
    StreamSampler,
)
from dataloader.errors import ArgumentTypeError, ArgumentValueError, LoaderTimeoutError, WorkerError
from dataloader.memory import shm_ceiling
from dataloader.transform import PseudoTransform, Transform
from tests.harness import assert_same_batches, collect


class Range(StreamDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(np.arange(self.n, dtype=np.int64))


class Blocking(StreamDataset):
    """Yields two samples, then blocks until released."""

    def __init__(self):
        self.release = threading.Event()

    def __iter__(self):
        yield np.int64(0)
        yield np.int64(1)
        self.release.wait(10)


class Plus(Transform):
    def __init__(self, k):
        self.k = k

    def apply(self, input):
        return tuple(x + self.k for x in input)


def arrays(n=10):
    return ArrayDataset(np.arange(n, dtype=np.float32), np.arange(n) * 10)


def test_default_sampler_is_sequential_batches_of_one():
    batches = collect(DataLoader(arrays(3)))
    assert len(batches) == 3
    assert batches[1][0].tolist() == [1.0] and batches[1][1].tolist() == [10]


def test_batches_follow_the_sampler_and_transform():
    dataset = ArrayDataset(np.arange(10))
    loader = DataLoader(dataset, SequentialSampler(dataset, batch_size=4), transform=Plus(100))
    assert [b[0].tolist() for b in loader] == [[100, 101, 102, 103], [104, 105, 106, 107], [108, 109]]
    assert len(loader) == 3


def test_each_iter_is_a_new_epoch():
    dataset = arrays(20)
    loader = DataLoader(dataset, RandomSampler(dataset, batch_size=20, seed=1))
    first, second = (next(iter(loader))[1].tolist() for _ in range(2))
    assert sorted(first) == sorted(second) and first != second


def test_megengine_attributes_are_reachable():
    dataset = arrays()
    loader = DataLoader(dataset, num_workers=0, timeout=3, preload=False)
    assert loader.dataset is dataset and loader.num_workers == 0 and loader.timeout == 3
    assert isinstance(loader.collator, Collator) and isinstance(loader.sampler, SequentialSampler)


@pytest.mark.parametrize(
    "kwargs, error, text",
    [
        ({"num_workers": -1}, ArgumentValueError, "`num_workers`"),
        ({"num_workers": 1.5}, ArgumentTypeError, "`num_workers`"),
        ({"timeout": -2}, ArgumentValueError, "`timeout`"),
        ({"preload": "yes"}, ArgumentTypeError, "`preload`"),
        ({"prefetch_factor": 0}, ArgumentValueError, "`prefetch_factor`"),
        ({"persistent_workers": True}, ArgumentValueError, "num_workers"),
        ({"multiprocessing_context": "teleport"}, ArgumentValueError, "`multiprocessing_context`"),
        ({"multiprocessing_context": 3}, ArgumentTypeError, "`multiprocessing_context`"),
        ({"seed": -1}, ArgumentValueError, "`seed`"),
        ({"worker_init_fn": 5}, ArgumentTypeError, "`worker_init_fn`"),
        ({"shm_budget": 0}, ArgumentValueError, "`shm_budget`"),
        ({"transform": object()}, ArgumentTypeError, "`transform`"),
        ({"collator": 42}, ArgumentTypeError, "`collator`"),  # a function is taken, as collate_fn
    ],
)
def test_bad_arguments_fail_at_construction(kwargs, error, text):
    with pytest.raises(error, match=text):
        DataLoader(arrays(), **kwargs)


@pytest.mark.parametrize("budget", [2**62, "ceiling + 1"])
def test_a_shared_memory_budget_no_machine_here_could_hold_is_refused(budget):
    ceiling, what = shm_ceiling()
    budget = ceiling + 1 if budget == "ceiling + 1" else budget
    with pytest.raises(ArgumentValueError, match=rf"`shm_budget` must be at most {ceiling} bytes") as info:
        DataLoader(arrays(), num_workers=1, shm_budget=budget)
    assert what in str(info.value) and f"got {budget}" in str(info.value)
    assert DataLoader(arrays(), num_workers=1, shm_budget=ceiling).options.shm_budget == ceiling


def test_argument_errors_are_value_and_type_errors():
    with pytest.raises(ValueError):
        DataLoader(arrays(), num_workers=-1)
    with pytest.raises(TypeError):
        DataLoader(arrays(), transform=3)


def test_dataset_sampler_kind_mismatch_is_a_clear_error():
    with pytest.raises(ArgumentTypeError, match="StreamDataset needs a StreamSampler"):
        DataLoader(Range(4), SequentialSampler(arrays(), batch_size=2))
    with pytest.raises(ArgumentTypeError, match="map-style Dataset needs a map sampler"):
        DataLoader(arrays(), StreamSampler(batch_size=2))
    with pytest.raises(ArgumentTypeError, match="`dataset` must be a Dataset"):
        DataLoader(object())  # an iterator is a stream now, as PyTorch takes it


def test_len_of_a_stream_loader_is_a_clear_type_error():
    with pytest.raises(TypeError, match="stream"):
        len(DataLoader(Range(4), StreamSampler(batch_size=2)))


def test_serial_stream_keeps_the_final_short_batch_and_ends():
    batches = collect(DataLoader(Range(10), StreamSampler(batch_size=4)))
    assert [b.tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_serial_stream_end_does_not_spin():
    """MegEngine's serial stream loader busy-loops at 100% CPU once the stream ends."""
    loader = DataLoader(Range(6), StreamSampler(batch_size=4), timeout=5)
    start = time.process_time()
    wall = time.monotonic()
    batches = collect(loader)
    assert len(batches) == 2
    assert time.monotonic() - wall < 2.0
    assert time.process_time() - start < 1.0
    # A second epoch reads the stream again from the start.
    assert [b.tolist() for b in collect(loader)] == [[0, 1, 2, 3], [4, 5]]


def test_serial_stream_timeout_raises_without_touching_the_main_thread():
    dataset = Blocking()
    iterator = iter(DataLoader(dataset, StreamSampler(batch_size=4), timeout=0.3))
    start = time.monotonic()
    with pytest.raises(LoaderTimeoutError, match="timeout") as caught:
        next(iterator)
    assert 0.25 < time.monotonic() - start < 3.0
    assert isinstance(caught.value, TimeoutError) and isinstance(caught.value, RuntimeError)
    dataset.release.set()
    iterator.close()


def test_serial_stream_error_propagates_unchanged():
    class Broken(StreamDataset):
        def __iter__(self):
            yield np.int64(1)
            raise KeyError("gone")

    for timeout in (0, 5):
        with pytest.raises(KeyError, match="gone"):
            collect(DataLoader(Broken(), StreamSampler(batch_size=4), timeout=timeout))


def test_iterator_close_and_context_manager():
    loader = DataLoader(arrays(10), SequentialSampler(arrays(10), batch_size=2))
    with iter(loader) as iterator:
        next(iterator)
    assert list(iterator) == []
    iterator.close()  # idempotent
    assert len(iter(loader)) == 5


def test_serial_exception_propagates_unwrapped():
    class Bad(Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, index):
            raise IndexError(f"no {index}")

    with pytest.raises(IndexError, match="no 0") as caught:
        collect(DataLoader(Bad()))
    assert type(caught.value) is IndexError


def test_seeded_serial_loader_is_reproducible_and_leaves_global_state_alone():
    class Noise(Transform):
        def apply(self, input):
            return np.float64(random.random() + np.random.rand())

    dataset = arrays(6)

    def run():
        loader = DataLoader(dataset, SequentialSampler(dataset, batch_size=3), transform=Noise(), seed=7)
        return [b.tolist() for b in loader]

    random.seed(1)
    np.random.seed(1)
    expected_next = (random.random(), np.random.rand())
    random.seed(1)
    np.random.seed(1)
    first = run()
    assert (random.random(), np.random.rand()) == expected_next
    assert first == run()
    assert first[0] != first[1]


def test_infinite_sampler_keeps_going():
    dataset = arrays(3)
    iterator = iter(DataLoader(dataset, Infinite(SequentialSampler(dataset, batch_size=2))))
    got = [next(iterator)[0].tolist() for _ in range(4)]
    assert got == [[0.0, 1.0], [2.0], [0.0, 1.0], [2.0]]
    iterator.close()


# -- arguments that used to be accepted, then fail at the first batch -------------------------


class Jitter(Transform):
    """Adds a draw from numpy's global generator: the batches show the seed they were made with."""

    def apply(self, input):
        return tuple(x + np.random.randint(1000) for x in input)


class NumbersStream(StreamDataset):
    def __iter__(self):
        return iter(np.arange(8, dtype=np.int64))


class ListFromIter(StreamDataset):
    """``__iter__`` returns a list, not an iterator."""

    def __iter__(self):
        return [np.int64(1), np.int64(2)]


class SingleIndices:
    """A sampler that yields single indices, not lists of them."""

    def __iter__(self):
        return iter(range(4))

    def __len__(self):
        return 4


class NegativeIndex:
    """A sampler whose second batch reaches back with -1."""

    def __iter__(self):
        return iter([[0, 1], [-1, 2]])

    def __len__(self):
        return 2


class Sized:
    """A map dataset or sampler whose ``__len__`` returns ``size``."""

    def __init__(self, size):
        self.size = size

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        return np.int64(index)

    def __iter__(self):
        return iter([[0]])


def _workers(num_workers, method="fork", **options):
    return dict(num_workers=num_workers, multiprocessing_context=method if num_workers else None, **options)


def _jittered(seed, num_workers=0, method="fork"):
    dataset = arrays(12)
    loader = DataLoader(dataset, SequentialSampler(dataset, batch_size=4), transform=Jitter(), seed=seed,
                        **_workers(num_workers, method))
    return collect(loader)


def test_a_numpy_integer_seed_is_an_ordinary_seed():
    loader = DataLoader(arrays(), seed=np.int64(3), num_workers=np.int64(0), prefetch_factor=np.int32(2))
    assert type(loader.options.seed) is int and loader.options.seed == 3
    assert type(loader.options.num_workers) is int and type(loader.options.prefetch_factor) is int
    assert_same_batches(_jittered(np.int64(3)), _jittered(3))


def test_a_numpy_integer_seed_seeds_workers(no_leaks, start_method):
    assert_same_batches(_jittered(np.uint64(3), 2, start_method), _jittered(3))


def test_the_largest_seed_seeds_every_worker(no_leaks):
    """Worker k seeds with seed + k: past 2**64 torch's generator refused it and the worker died."""
    pytest.importorskip("torch")
    assert_same_batches(_jittered(2**64 - 1, 2), _jittered(2**64 - 1))


@pytest.mark.parametrize("kind", ["map", "stream"])
def test_an_infinite_timeout_waits_forever_in_this_process(kind):
    dataset, sampler = (arrays(8), None) if kind == "map" else (NumbersStream(), StreamSampler(batch_size=4))
    loader = DataLoader(dataset, sampler, timeout=math.inf)
    assert loader.timeout == 0
    assert len(collect(loader)) in (8, 2)


def test_an_infinite_timeout_waits_forever_in_workers(no_leaks, start_method):
    dataset = arrays(16)
    loader = DataLoader(dataset, SequentialSampler(dataset, batch_size=4), timeout=float("inf"),
                        **_workers(2, start_method))
    assert [b[1].tolist() for b in loader] == [[0, 10, 20, 30], [40, 50, 60, 70], [80, 90, 100, 110],
                                               [120, 130, 140, 150]]


@pytest.mark.parametrize("timeout", [2**31 / 1000, 3e6, 1e300])
def test_a_timeout_longer_than_a_wait_can_be_is_refused_at_construction(timeout):
    with pytest.raises(ArgumentValueError, match=r"`timeout` must be at most 2147483 seconds \(about 24 days\)"):
        DataLoader(arrays(), timeout=timeout, num_workers=2)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"transform": PseudoTransform}, "transform"),
        ({"collator": Collator}, "collator"),
        ({"sampler": SequentialSampler}, "sampler"),
    ],
)
def test_a_class_in_place_of_an_instance_is_refused_at_construction(kwargs, name):
    cls = next(iter(kwargs.values()))
    with pytest.raises(ArgumentTypeError, match=rf"`{name}` must be a .* instance; got the class {cls.__name__}\."):
        DataLoader(arrays(), **kwargs)


def test_a_dataset_class_in_place_of_a_dataset_is_refused_at_construction():
    with pytest.raises(ArgumentTypeError, match=r"`dataset` must be a dataset instance; got the class ArrayDataset\."):
        DataLoader(ArrayDataset)


@pytest.mark.parametrize("size", [-1, 2.5])
def test_a_len_that_len_refuses_is_refused_at_construction(size):
    error = ArgumentValueError if size == -1 else ArgumentTypeError
    with pytest.raises(error, match=rf"`len\(dataset\)` must be a non-negative integer; Sized.__len__ returned {size}\."):
        DataLoader(Sized(size))
    with pytest.raises(error, match=r"`len\(dataset\)`"):
        DataLoader(Sized(size), NegativeIndex())  # the loader's own sampler does not measure it
    with pytest.raises(error, match=rf"`len\(sampler\)` must be a non-negative integer; Sized.__len__ returned {size}\."):
        DataLoader(arrays(), Sized(size))


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_sampler_yielding_single_indices_is_a_clear_error(no_leaks, num_workers):
    loader = DataLoader(arrays(), SingleIndices(), **_workers(num_workers))
    with pytest.raises(ArgumentTypeError, match=r"`sampler` must yield lists of indices \(it is a batch sampler\); "
                       r"its batch 0 is int 0\."):
        next(iter(loader))


def test_a_stream_whose_iter_returns_no_iterator_is_a_clear_error():
    for timeout in (0, 5):  # read directly, or in a helper thread
        loader = DataLoader(ListFromIter(), StreamSampler(batch_size=2), timeout=timeout)
        with pytest.raises(ArgumentTypeError, match=r"ListFromIter.__iter__ must return an iterator; got list\."):
            next(iter(loader))


def test_a_parallel_stream_whose_iter_returns_no_iterator_is_a_clear_error(no_leaks, start_method):
    loader = DataLoader(ListFromIter(), StreamSampler(batch_size=2), parallel_stream=True, **_workers(2, start_method))
    with pytest.raises(ArgumentTypeError, match=r"ListFromIter.__iter__ must return an iterator") as caught:
        next(iter(loader))
    assert isinstance(caught.value, WorkerError)


def test_a_negative_index_from_the_sampler_is_an_error_not_the_last_sample():
    dataset = [np.array([i]) for i in range(5)]  # a list reads dataset[-1] happily
    iterator = iter(DataLoader(dataset, NegativeIndex()))
    assert next(iterator).tolist() == [[0], [1]]
    with pytest.raises(ArgumentValueError, match=r"the sampler gave the negative index -1 \(in \[-1, 2\]\)"):
        next(iterator)


def test_a_negative_index_in_a_worker_is_an_error_at_its_batch(no_leaks, start_method):
    iterator = iter(DataLoader(Sized(5), NegativeIndex(), **_workers(2, start_method)))
    assert next(iterator).tolist() == [0, 1]
    with pytest.raises(ArgumentValueError, match=r"negative index -1") as caught:
        next(iterator)
    assert isinstance(caught.value, WorkerError) and caught.value.indices == [-1, 2]
    iterator.close()


# -- pickling -----------------------------------------------------------------------------------


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_running_loader_pickles_its_configuration(no_leaks, num_workers):
    dataset = arrays(12)
    loader = DataLoader(dataset, RandomSampler(dataset, batch_size=4, seed=1), transform=Jitter(), seed=5,
                        persistent_workers=num_workers > 0, **_workers(num_workers))
    iterator = iter(loader)
    next(iterator)

    copy = pickle.loads(pickle.dumps(loader))

    iterator.close()
    assert copy.options == loader.options and len(copy) == len(loader) == 3
    assert_same_batches(collect(copy), collect(loader))  # both at the same epoch, with fresh pipelines
    copy.close()
    loader.close()


class UnknownLength:
    """A sampler whose length cannot be known: fine with epoch_size, which never asks."""

    def __iter__(self):
        return iter([[0, 1], [2]])

    def __len__(self):
        raise NotImplementedError("an endless sampler")


def test_a_len_that_raises_is_left_for_when_a_length_is_needed():
    loader = DataLoader(arrays(), UnknownLength(), epoch_size=3)
    assert [b[0].tolist() for b in loader] == [[0.0, 1.0], [2.0], [0.0, 1.0]]
