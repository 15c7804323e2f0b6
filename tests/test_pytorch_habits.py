"""PyTorch's habits on this loader: batch_size/shuffle/drop_last without a sampler, plain
functions as transform and collate_fn, iterables as streams, and the attributes PyTorch users
read (loader.batch_size, loader.drop_last, dataloader.__version__)."""

import importlib.metadata

import numpy as np
import pytest

import dataloader
from dataloader import (
    ArrayDataset, DataLoader, RandomSampler, SequentialSampler, StreamDataset, StreamSampler,
)
from dataloader.errors import ArgumentTypeError, ArgumentValueError
from dataloader.transform import Compose, Transform

DATA = ArrayDataset(np.arange(10))


def ids(loader):
    return [batch[0].tolist() for batch in loader]


class Count(StreamDataset):
    def __iter__(self):
        return iter(range(7))


def test_batch_size_alone_is_a_sequential_sampler():
    loader = DataLoader(DATA, batch_size=4)
    assert isinstance(loader.sampler, SequentialSampler)
    assert ids(loader) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert (loader.batch_size, loader.drop_last, len(loader)) == (4, False, 3)


@pytest.mark.parametrize("workers", [0, 2])
def test_shuffle_is_a_random_sampler_seeded_by_the_loaders_seed(workers):
    loader = DataLoader(DATA, batch_size=4, shuffle=True, drop_last=True, seed=3, num_workers=workers)
    assert isinstance(loader.sampler, RandomSampler) and loader.drop_last
    first, second = ids(loader), ids(loader)
    assert [len(b) for b in first] == [4, 4] and first != second  # a new order each epoch
    explicit = DataLoader(DATA, RandomSampler(DATA, batch_size=4, drop_last=True, seed=3))
    assert ids(explicit) == first  # the same sampler, written out


def test_the_shortcuts_default_as_pytorchs_do():
    assert ids(DataLoader(DATA, shuffle=False)) == [[i] for i in range(10)]  # batch_size=1
    assert DataLoader(DATA, drop_last=False).batch_size == 1


def test_a_sampler_and_a_shortcut_together_are_an_error():
    with pytest.raises(ArgumentValueError, match=r"`sampler` and batch_size=8, shuffle=True were both given"):
        DataLoader(DATA, SequentialSampler(DATA, batch_size=4), batch_size=8, shuffle=True)


@pytest.mark.parametrize("kwargs,error", [
    ({"batch_size": 0}, r"`batch_size` must be a positive integer"),
    ({"shuffle": "yes"}, r"`shuffle` must be"),
    ({"drop_last": 1}, r"`drop_last` must be"),
])
def test_bad_shortcuts_name_the_argument(kwargs, error):
    with pytest.raises((ArgumentTypeError, ArgumentValueError), match=error):
        DataLoader(DATA, **kwargs)


def test_a_stream_takes_batch_size_and_drop_last_and_refuses_shuffle():
    loader = DataLoader(Count(), batch_size=3)
    assert isinstance(loader.sampler, StreamSampler) and loader.batch_size == 3
    assert [b.tolist() for b in loader] == [[0, 1, 2], [3, 4, 5], [6]]
    dropping = DataLoader(Count(), batch_size=3, drop_last=True)
    assert dropping.drop_last and [b.tolist() for b in dropping] == [[0, 1, 2], [3, 4, 5]]
    with pytest.raises(ArgumentValueError, match="shuffle=True: a stream has no order to shuffle"):
        DataLoader(Count(), batch_size=3, shuffle=True)


def double(sample):  # module level: spawn workers pickle it
    return (sample[0] * 2,)


def total(samples):
    return sum(int(s[0]) for s in samples)


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_plain_functions_as_transform_and_collate_fn(context):
    loader = DataLoader(DATA, batch_size=5, transform=double, collate_fn=total, num_workers=2,
                        multiprocessing_context=context)
    assert list(loader) == [sum(range(0, 10, 2)), sum(range(10, 20, 2))]
    assert list(DataLoader(DATA, batch_size=5, collator=total)) == [10, 35]  # MegEngine's name too


def test_a_compose_takes_plain_functions_beside_transforms():
    class AddOne(Transform):
        def apply(self, sample):
            return (sample[0] + 1,)

    loader = DataLoader(DATA, batch_size=10, transform=Compose([double, AddOne()]))
    assert next(iter(loader))[0].tolist() == [2 * i + 1 for i in range(10)]


def test_classes_and_non_callables_are_still_refused():
    with pytest.raises(ArgumentTypeError, match=r"got the class"):
        DataLoader(DATA, transform=Transform)
    with pytest.raises(ArgumentTypeError, match=r"`collate_fn` must be a Collator"):
        DataLoader(DATA, collate_fn=42)
    with pytest.raises(ArgumentValueError, match=r"give `collator` or its PyTorch name `collate_fn`, not both"):
        DataLoader(DATA, collator=total, collate_fn=total)


def test_any_iterable_object_is_a_stream():
    class Iterable:  # not a StreamDataset: what a torch IterableDataset looks like to us
        def __iter__(self):
            return iter(range(5))

    assert [b.tolist() for b in DataLoader(Iterable(), batch_size=2)] == [[0, 1], [2, 3], [4]]


def test_a_torch_iterable_dataset_is_a_stream():
    torch_data = pytest.importorskip("torch.utils.data", reason="torch is not installed")

    class Numbers(torch_data.IterableDataset):
        def __iter__(self):
            return iter(range(5))

    assert [b.tolist() for b in DataLoader(Numbers(), batch_size=2, num_workers=2)] == [[0, 1], [2, 3], [4]]


def test_an_object_that_is_neither_says_what_to_subclass():
    with pytest.raises(ArgumentTypeError, match=r"got int, which has neither. Subclass dataloader.Dataset"):
        DataLoader(42)


def test_version_matches_the_installed_distribution():
    assert dataloader.__version__ == importlib.metadata.version("dataloader")
