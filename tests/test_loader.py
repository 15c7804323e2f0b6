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
from dataloader.errors import ArgumentTypeError, ArgumentValueError, LoaderTimeoutError
from dataloader.transform import Transform
from tests.harness import collect


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
        ({"collator": lambda x: x}, ArgumentTypeError, "`collator`"),
    ],
)
def test_bad_arguments_fail_at_construction(kwargs, error, text):
    with pytest.raises(error, match=text):
        DataLoader(arrays(), **kwargs)


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
        DataLoader([1, 2, 3].__iter__())


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
