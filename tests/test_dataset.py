import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from dataloader import (
    ArrayDataset,
    Collated,
    Collator,
    ConcatDataset,
    DataLoader,
    Dataset,
    SequentialSampler,
    StreamDataset,
)
from dataloader.errors import ArgumentTypeError, ArgumentValueError
from dataloader.transform import Transform


class Squares(Dataset):  # no __init__: a subclass need not define one
    def __getitem__(self, index):
        return index * index

    def __len__(self):
        return 5


class Counting(StreamDataset):
    def __iter__(self):
        return iter(range(3))


def test_dataset_subclass_without_init_works():
    dataset = Squares()
    assert len(dataset) == 5 and dataset[3] == 9


def test_abstract_methods_are_enforced():
    class Missing(Dataset):
        def __len__(self):
            return 1

    with pytest.raises(TypeError):
        Missing()
    with pytest.raises(TypeError):
        StreamDataset()


def test_stream_dataset_yields_one_sample_per_next():
    stream = iter(Counting())
    assert [next(stream), next(stream), next(stream)] == [0, 1, 2]
    with pytest.raises(StopIteration):
        next(stream)


def test_array_dataset_items_are_tuples_of_rows():
    images = np.arange(12).reshape(4, 3)
    labels = np.array([7, 8, 9, 10])
    dataset = ArrayDataset(images, labels)
    assert len(dataset) == 4
    image, label = dataset[2]
    assert np.array_equal(image, images[2]) and label == 9


def test_array_dataset_rejects_length_mismatch():
    with pytest.raises(ValueError, match=r"same length.*\[3, 2\]"):
        ArrayDataset(np.zeros(3), np.zeros(2))


def test_array_dataset_rejects_no_arrays():
    with pytest.raises(ArgumentValueError):
        ArrayDataset()


def test_concat_dataset_indexes_across_parts_and_from_the_end():
    dataset = ConcatDataset([ArrayDataset(np.arange(3)), ArrayDataset(np.arange(10, 12))])
    assert len(dataset) == 5
    assert [dataset[i][0] for i in range(5)] == [0, 1, 2, 10, 11]
    assert dataset[-1][0] == 11 and dataset[-5][0] == 0
    with pytest.raises(IndexError):
        dataset[5]
    with pytest.raises(IndexError):
        dataset[-6]


def test_concat_dataset_accepts_a_generator():
    dataset = ConcatDataset(Squares() for _ in range(3))
    assert len(dataset) == 15 and dataset[7] == 4


def test_concat_dataset_rejects_streams_clearly():
    with pytest.raises(ArgumentTypeError, match=r"datasets\[1\].*StreamDataset"):
        ConcatDataset([Squares(), Counting()])


# -- bulk fetch: ArrayDataset.__getitems__ and the Collated protocol ----------------------------

_NUMERIC = st.sampled_from([np.bool_, np.int8, np.uint16, np.int64, np.float16, np.float32, np.float64])


@settings(max_examples=60, deadline=None)
@given(data=st.data(), n=st.integers(1, 12), columns=st.integers(1, 3))
def test_bulk_fetch_gives_exactly_what_collating_the_samples_gives(data, n, columns):
    arrays = [
        data.draw(hnp.arrays(data.draw(_NUMERIC), (n, *data.draw(hnp.array_shapes(min_dims=0, max_dims=2, max_side=3)))))
        for _ in range(columns)
    ]
    dataset = ArrayDataset(*arrays)
    indices = data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=8))
    bulk = dataset.__getitems__(indices)
    assert isinstance(bulk, Collated) and bulk.size == len(indices)
    expected = Collator().apply([dataset[i] for i in indices])
    assert type(bulk.batch) is type(expected) and len(bulk.batch) == len(expected)
    for got, want in zip(bulk.batch, expected):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_object_arrays_and_lists_keep_the_per_sample_path():
    assert isinstance(ArrayDataset(np.array(["a", "b"], dtype=object)).__getitems__([0]), list)
    assert isinstance(ArrayDataset([1, 2, 3]).__getitems__([0, 2]), list)


def test_bulk_fetch_rejects_an_index_out_of_range():
    with pytest.raises(IndexError, match="out of range"):
        ArrayDataset(np.arange(3)).__getitems__([0, 3])


class _AddOne(Transform):
    def apply(self, sample):
        return tuple(x + 1 for x in sample)


class _Listing(Collator):
    def apply(self, samples):
        return list(samples)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_per_sample_transform_or_a_custom_collator_sees_the_samples_of_a_collated_batch(num_workers):
    dataset = ArrayDataset(np.arange(6), np.arange(6) * 10)
    sampler = SequentialSampler(dataset, batch_size=3)
    plain = [b for b in DataLoader(dataset, sampler, num_workers=num_workers)]
    assert [b[1].tolist() for b in plain] == [[0, 10, 20], [30, 40, 50]]
    shifted = [b for b in DataLoader(dataset, sampler, transform=_AddOne(), num_workers=num_workers)]
    assert [b[0].tolist() for b in shifted] == [[1, 2, 3], [4, 5, 6]]
    listed = next(iter(DataLoader(dataset, sampler, collator=_Listing(), num_workers=num_workers)))
    assert [(int(a), int(b)) for a, b in listed] == [(0, 0), (1, 10), (2, 20)]


class _OnlyBatches:
    """A dataset whose __getitems__ collates itself and offers no rows."""

    def __len__(self):
        return 4

    def __getitem__(self, index):
        return index

    def __getitems__(self, indices):
        return Collated(np.asarray(indices), len(indices))


def test_a_collated_batch_without_rows_under_a_per_sample_transform_is_a_clear_error():
    dataset = _OnlyBatches()
    assert next(iter(DataLoader(dataset, SequentialSampler(dataset, batch_size=2)))).tolist() == [0, 1]
    with pytest.raises(Exception, match="without its rows"):
        next(iter(DataLoader(dataset, SequentialSampler(dataset, batch_size=2), transform=_AddOne())))
