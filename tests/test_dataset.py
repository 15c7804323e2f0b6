import numpy as np
import pytest

from dataloader import ArrayDataset, ConcatDataset, Dataset, StreamDataset
from dataloader.errors import ArgumentTypeError, ArgumentValueError


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
