"""What kind a PyTorch dataset is taken for: PyTorch's own rule (an ``IterableDataset`` is a
stream, whatever else it defines), and torch's ``Dataset.__getitem__`` (which only raises) does
not make a dataset indexable."""

from __future__ import annotations

import pytest

from dataloader import DataLoader, SequentialSampler, StreamSampler
from dataloader._stages.kinds import is_stream

torch_data = pytest.importorskip("torch.utils.data", reason="torch is not installed")


class SizedNumbers(torch_data.IterableDataset):
    """An IterableDataset with __len__ (a hint PyTorch allows): its inherited __getitem__ raises."""

    def __iter__(self):
        return iter(range(5))

    def __len__(self):
        return 5


class IterOnDataset(torch_data.Dataset):
    """A torch map-style base, yet only __iter__ and __len__: the __getitem__ is torch's, which raises."""

    def __iter__(self):
        return iter(range(5))

    def __len__(self):
        return 5


class Squares(torch_data.Dataset):
    def __getitem__(self, index):
        return index * index

    def __len__(self):
        return 4


class IndexableStream(torch_data.IterableDataset):
    """An IterableDataset that also indexes: still a stream, as PyTorch takes it."""

    def __iter__(self):
        return iter(range(3))

    def __getitem__(self, index):
        return index

    def __len__(self):
        return 3


@pytest.mark.parametrize("dataset", [SizedNumbers(), IterOnDataset(), IndexableStream()],
                         ids=["sized-iterable", "iter-on-dataset", "indexable-iterable"])
def test_torch_streams_are_streams(dataset):
    assert is_stream(dataset)
    assert isinstance(DataLoader(dataset).sampler, StreamSampler)


def test_a_torch_map_dataset_is_a_map_dataset():
    assert not is_stream(Squares())
    loader = DataLoader(Squares(), batch_size=2)
    assert isinstance(loader.sampler, SequentialSampler) and len(loader) == 2
    assert [b.tolist() for b in loader] == [[0, 1], [4, 9]]


@pytest.mark.parametrize("workers", [0, 2])
def test_an_iterable_dataset_with_len_iterates_as_a_stream(no_leaks, workers):
    loader = DataLoader(SizedNumbers(), batch_size=2, num_workers=workers, multiprocessing_context="fork")
    assert [b.tolist() for b in loader] == [[0, 1], [2, 3], [4]]
