"""The behaviours MegEngine's own data unit tests pin down, checked here in our words.

MegEngine's ``imperative/python/test/unit/data`` (dataset, sampler, transform, dataloader and
preload tests) should pass against this library with only the import names mapped, wherever
they need no MegEngine tensor or GPU. Each test below states one such behaviour;
docs/migrating-from-megengine.md lists the names and where they differ.
"""

from __future__ import annotations

import collections
import itertools
import math
import multiprocessing
import re
import time

import numpy as np
import pytest

import dataloader.transform.vision as T
from dataloader import (
    ArrayDataset,
    Collator,
    DataLoader,
    Dataset,
    Infinite,
    MapSampler,
    RandomSampler,
    ReplacementSampler,
    Sampler,
    SequentialSampler,
    StreamDataset,
    StreamSampler,
    get_worker_info,
)
from dataloader.transform import CudaTransform, PseudoTransform, Transform

# Both frameworks' patterns for a worker's exception: MegEngine's test and PyTorch's wording.
_MEGENGINE_PATTERN = r"Caught RuntimeError in DataLoader worker process"
_PYTORCH_PATTERN = r"^Caught RuntimeError in DataLoader worker process \d"


def images(rows: int = 40) -> ArrayDataset:
    rng = np.random.default_rng(0)
    return ArrayDataset(rng.integers(0, 255, (rows, 1, 8, 8), dtype=np.uint8), np.arange(rows))


class Counting(StreamDataset):
    """Tiny HWC images labelled 0, 1, 2, ...; optionally slow to read. No ``super().__init__()``,
    as MegEngine's test streams do not call it either."""

    def __init__(self, rows: int, delay: float = 0.0) -> None:
        self.rows, self.delay = rows, delay

    def __iter__(self):
        for label in range(self.rows):
            time.sleep(self.delay)
            yield np.full((2, 2, 3), label % 256, np.uint8), label


class PerWorker(StreamDataset):
    """Each worker reads its own share, found with ``get_worker_info().idx`` and ``.worker``."""

    def __init__(self, rows: int) -> None:
        self.labels = list(range(rows))

    def __iter__(self):
        info = get_worker_info()
        share = math.ceil(len(self.labels) / info.worker)
        for label in self.labels[info.idx * share : (info.idx + 1) * share]:
            yield np.zeros((2, 2, 3), np.uint8), label


class Sleepy(Transform):
    def __init__(self) -> None:  # no super().__init__(), as in MegEngine's tests
        pass

    def apply(self, sample):
        time.sleep(5)
        return sample


class Failing(Transform):
    def apply(self, sample):
        raise RuntimeError("this transform always fails")


def to_chw() -> T.Compose:
    return T.Compose([T.Normalize(mean=(103, 116, 123), std=(57, 57, 58)), T.ToMode("CHW")])


# -- datasets ---------------------------------------------------------------------------------


def test_the_dataset_bases_cannot_be_instantiated():
    for base in (Dataset, StreamDataset):
        with pytest.raises(TypeError):
            base()


def test_array_dataset_gives_one_tuple_per_row_and_checks_lengths():
    dataset = ArrayDataset(np.zeros((5, 3, 4, 4)), np.zeros((5, 1)))
    assert len(dataset) == 5
    assert [part.shape for part in dataset[0]] == [(3, 4, 4), (1,)]
    assert ArrayDataset(list(range(7)))[6] == (6,)  # a plain list is an array too
    with pytest.raises(ValueError):
        ArrayDataset(np.zeros((5, 3)), np.zeros((1,)))


# -- samplers ---------------------------------------------------------------------------------


def firsts(sampler) -> list:
    return [batch[0] for batch in sampler]


def test_samplers_default_to_batches_of_one():
    rows = list(range(30))
    assert firsts(SequentialSampler(ArrayDataset(rows))) == rows
    shuffled = firsts(RandomSampler(ArrayDataset(rows)))
    assert shuffled != rows and sorted(shuffled) == rows


def test_random_sampler_order_follows_the_seed():
    dataset = ArrayDataset(list(range(30)))
    first, again, other = (firsts(RandomSampler(dataset, seed=s)) for s in (0, 0, 1))
    assert first == again != other
    assert sorted(first) == sorted(other) == list(range(30))


def test_replacement_sampler_draws_num_samples_by_weight():
    sampler = ReplacementSampler(ArrayDataset(list(range(20))), num_samples=30, weights=list(range(20)))
    drawn = firsts(sampler)
    assert len(drawn) == 30 and 0 not in drawn  # index 0 has weight 0


@pytest.mark.parametrize("drop_last", [False, True])
def test_sampler_length_is_the_number_of_batches_it_yields(drop_last):
    sampler = SequentialSampler(ArrayDataset(list(range(24))), batch_size=5, drop_last=drop_last)
    assert len(list(sampler)) == len(sampler) == (4 if drop_last else 5)


@pytest.mark.parametrize("arguments", [{"batch_size": 0}, {"batch_size": -2}, {"num_samples": 0}])
def test_bad_sampler_values_are_value_errors(arguments):
    with pytest.raises(ValueError):
        ReplacementSampler(ArrayDataset(list(range(4))), **arguments)
    with pytest.raises(ValueError):
        ReplacementSampler(ArrayDataset(list(range(4))), weights=[1.0, 2.0])


def test_sampler_base_is_abstract_and_map_sampler_subclasses_choose_the_order():
    with pytest.raises(TypeError):
        Sampler()

    class Backwards(MapSampler):
        def sample(self):
            return list(range(len(self.dataset)))[::-1]

    class SecondHalf(Backwards):
        def scatter(self, indices):
            return indices[len(indices) // 2 :]

    dataset = ArrayDataset(list(range(10)))
    assert list(Backwards(dataset, batch_size=4)) == [[9, 8, 7, 6], [5, 4, 3, 2], [1, 0]]
    assert list(SecondHalf(dataset, batch_size=5, world_size=2, rank=1)) == [[4, 3, 2, 1, 0]]


def test_infinite_wraps_around_and_forwards_attributes():
    infinite = Infinite(SequentialSampler(ArrayDataset(list(range(6))), batch_size=4))
    assert list(itertools.islice(infinite, 4)) == [[0, 1, 2, 3], [4, 5], [0, 1, 2, 3], [4, 5]]
    assert len(infinite) == np.iinfo(np.int64).max
    assert infinite.batch_size == 4


# -- transforms and collator ------------------------------------------------------------------


def labelled_images() -> list:
    rng = np.random.default_rng(1)
    return [(rng.integers(0, 255, (60, 60, 3), dtype=np.uint8), rng.integers(0, 10, (4,))) for _ in range(3)]


@pytest.mark.parametrize(
    ("transform", "shape"),
    [
        (T.ToMode(mode="CHW"), (3, 60, 60)),
        (T.CenterCrop(output_size=(50, 40)), (50, 40, 3)),
        (T.ColorJitter(), (60, 60, 3)),
        (T.RandomHorizontalFlip(prob=1), (60, 60, 3)),
        (T.RandomVerticalFlip(prob=1), (60, 60, 3)),
        (T.RandomResizedCrop(output_size=(30, 30)), (30, 30, 3)),
        (T.Normalize(), (60, 60, 3)),
        (T.RandomCrop((90, 70), padding_size=10, padding_value=[1, 2, 3]), (90, 70, 3)),
        (T.Compose([T.CenterCrop(output_size=(50, 40)), T.RandomHorizontalFlip(prob=1), T.ToMode("CHW")]), (3, 50, 40)),
    ],
)
def test_vision_transforms_shape_the_image_and_pass_the_label_through(transform, shape):
    out = transform.apply_batch(labelled_images())
    assert [(image.shape, label.shape) for image, label in out] == [(shape, (4,))] * 3


def test_the_vision_namespace_stands_in_for_megengine_data_transform():
    assert T.Transform is Transform and T.PseudoTransform is PseudoTransform
    assert repr(T.ToMode()) == "ToMode" and repr(PseudoTransform()) == "PseudoTransform"


def test_cuda_transform_as_it_is_changes_nothing():
    batch = (np.arange(4), np.arange(4))
    assert CudaTransform().apply(batch) is batch
    dataset = images(6)
    loader = DataLoader(dataset, SequentialSampler(dataset, batch_size=3), CudaTransform())
    assert [labels.tolist() for _, labels in loader] == [[0, 1, 2], [3, 4, 5]]


def test_collator_stacks_fields_and_rejects_what_it_cannot_stack():
    Pair = collections.namedtuple("Pair", "image label")
    batch = Collator().apply([Pair(np.zeros(3), 1), Pair(np.ones(3), 2)])
    assert type(batch) is Pair and batch.image.shape == (2, 3) and batch.label.tolist() == [1, 2]
    assert Collator().apply([{"x": 1.5}, {"x": 2.5}])["x"].dtype == np.float64
    assert list(Collator().apply(["a", "b"])) == ["a", "b"]
    with pytest.raises(TypeError):  # an unsupported type
        Collator().apply([object(), object()])
    with pytest.raises(ValueError):  # ragged arrays
        Collator().apply([np.zeros(2), np.zeros(3)])


# -- the loader -------------------------------------------------------------------------------


@pytest.mark.parametrize("preload", [False, True])
def test_loader_defaults_and_length(preload):
    dataset = images(100)
    loader = DataLoader(dataset, preload=preload)
    assert isinstance(loader.sampler, SequentialSampler)
    assert isinstance(loader.transform, PseudoTransform)
    assert isinstance(loader.collator, Collator)
    for drop_last, batches in ((False, 17), (True, 16)):
        sampler = RandomSampler(dataset, batch_size=6, drop_last=drop_last)
        assert len(DataLoader(dataset, sampler=sampler, preload=preload)) == batches


@pytest.mark.parametrize("arguments", [{"num_workers": -1}, {"timeout": -1}])
def test_negative_workers_or_timeout_are_value_errors(arguments):
    with pytest.raises(ValueError):
        DataLoader(images(), **arguments)


@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("preload", [False, True])
def test_map_dataset_batches(num_workers, preload):
    dataset = images()
    sampler = RandomSampler(dataset, batch_size=4, drop_last=False)
    loader = DataLoader(dataset, sampler=sampler, num_workers=num_workers, preload=preload, timeout=60)
    shapes = {(data.shape, label.shape) for data, label in loader}
    assert shapes == {((4, 1, 8, 8), (4,))}


@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("preload", [False, True])
def test_stream_batches_are_transformed_and_never_repeat(num_workers, preload):
    loader = DataLoader(Counting(100), StreamSampler(batch_size=4), to_chw(), num_workers=num_workers,
                        preload=preload, timeout=60)
    seen: set = set()
    for data, label in itertools.islice(loader, 10):
        assert data.shape == (4, 3, 2, 2) and label.shape == (4,)
        assert seen.isdisjoint(label.tolist())
        seen.update(label.tolist())


def test_parallel_stream_workers_read_their_own_share():
    loader = DataLoader(PerWorker(100), StreamSampler(batch_size=4), to_chw(), num_workers=2,
                        parallel_stream=True, timeout=60)
    labels = [label for _, batch in itertools.islice(loader, 10) for label in batch.tolist()]
    assert len(labels) == len(set(labels)) == 40


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_stream_that_stalls_is_a_timeout_runtime_error(num_workers):
    loader = DataLoader(Counting(10, delay=5), StreamSampler(batch_size=4), num_workers=num_workers, timeout=1)
    with pytest.raises(RuntimeError, match="timeout"):
        next(iter(loader))


def test_a_slow_worker_is_a_timeout_runtime_error():
    dataset = images()
    loader = DataLoader(dataset, sampler=RandomSampler(dataset, batch_size=4), transform=Sleepy(),
                        num_workers=2, timeout=1, preload=True)
    with pytest.raises(RuntimeError, match="timeout"):
        next(iter(loader))


def assert_caught_in_worker(loader, indices: bool) -> None:
    with pytest.raises(RuntimeError, match=_MEGENGINE_PATTERN) as caught:
        next(iter(loader))
    message = str(caught.value)
    assert re.match(_PYTORCH_PATTERN, message), message
    assert "(pid " in message and "(stage: transform)" in message, message
    assert ("while loading indices [" in message) is indices, message
    assert "Original Traceback (most recent call last):" in message, message
    assert "this transform always fails" in message, message


def test_a_worker_exception_matches_megengine_and_pytorch_messages():
    dataset = images()
    loader = DataLoader(dataset, sampler=RandomSampler(dataset, batch_size=4), transform=Failing(),
                        num_workers=2, preload=True, timeout=60)
    assert_caught_in_worker(loader, indices=True)


def test_a_parallel_stream_worker_exception_matches_too():
    loader = DataLoader(PerWorker(100), sampler=StreamSampler(batch_size=4), transform=Failing(),
                        num_workers=2, parallel_stream=True, timeout=60)
    assert_caught_in_worker(loader, indices=False)


def two_loaders_interleaved() -> None:
    dataset = images()
    train = DataLoader(dataset, sampler=RandomSampler(dataset, batch_size=4), num_workers=2, timeout=60)
    check = DataLoader(dataset, sampler=RandomSampler(dataset, batch_size=10), num_workers=2, timeout=60)
    for step, (data, _) in enumerate(train):
        assert data.shape == (4, 1, 8, 8)
        if step % 5 == 0:
            assert all(batch.shape == (10, 1, 8, 8) for batch, _ in check)


def test_two_parallel_loaders_can_be_iterated_inside_each_other():
    two_loaders_interleaved()


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_parallel_loaders_work_in_forked_child_processes():
    context = multiprocessing.get_context("fork")
    children = [context.Process(target=two_loaders_interleaved) for _ in range(2)]
    for child in children:
        child.start()
    for child in children:
        child.join(120)
        assert child.exitcode == 0
