"""A sampler the loader built (from batch_size/shuffle/drop_last, or the default one) follows the
dataset's current length at each epoch and in ``len(loader)``, as PyTorch reads ``len(dataset)``
at each ``iter()``; a sampler you built keeps the length it was built with."""

from __future__ import annotations

import pytest

from dataloader import DataLoader, SequentialSampler


class Growing:
    """A list-backed map dataset that can grow or shrink between epochs."""

    def __init__(self, n: int) -> None:
        self.items = list(range(n))

    def __getitem__(self, index: int) -> int:
        return self.items[index]

    def __len__(self) -> int:
        return len(self.items)


def values(loader) -> list[int]:
    return sorted(int(v) for batch in loader for v in batch)


@pytest.mark.parametrize("shortcuts", [{"batch_size": 4}, {"batch_size": 4, "shuffle": True, "seed": 1},
                                       {"batch_size": 4, "drop_last": True}, {}],
                         ids=["sequential", "shuffled", "drop-last", "default-sampler"])
def test_len_and_the_next_epoch_see_a_grown_dataset(shortcuts):
    data = Growing(10)
    loader = DataLoader(data, **shortcuts)
    size, drop = shortcuts.get("batch_size", 1), shortcuts.get("drop_last", False)
    expect = lambda n: (n // size) if drop else -(-n // size)  # noqa: E731
    kept = lambda n: n - n % size if drop else n  # noqa: E731
    assert len(loader) == expect(10) and len(values(loader)) == kept(10)
    data.items.extend(range(10, 15))
    assert len(loader) == expect(15)
    got = values(loader)
    assert len(got) == kept(15) and set(got) <= set(range(15))
    if not drop and not shortcuts.get("shuffle"):
        assert got == list(range(15))
    del data.items[6:]
    assert len(loader) == expect(6) and len(values(loader)) == kept(6)


def test_workers_that_start_each_epoch_see_the_grown_dataset(no_leaks, start_method):
    data = Growing(10)
    loader = DataLoader(data, batch_size=4, num_workers=2, multiprocessing_context=start_method)
    assert values(loader) == list(range(10))
    data.items.extend(range(10, 14))
    assert len(loader) == 4 and values(loader) == list(range(14))


def test_a_sampler_you_built_keeps_its_length():
    data = Growing(10)
    loader = DataLoader(data, SequentialSampler(data, batch_size=4))
    data.items.extend(range(10, 14))
    assert len(loader) == 3 and values(loader) == list(range(10))


def test_a_state_taken_after_growing_resumes_on_a_dataset_of_that_length():
    data = Growing(10)
    loader = DataLoader(data, batch_size=4, shuffle=True, seed=3)
    values(loader)
    data.items.extend(range(10, 14))
    iterator = iter(loader)
    first = [int(v) for v in next(iterator)]
    state = loader.state_dict()
    rest = [int(v) for batch in iterator for v in batch]
    resumed = DataLoader(Growing(14), batch_size=4, shuffle=True, seed=3)
    resumed.load_state_dict(state)
    assert [int(v) for batch in resumed for v in batch] == rest
    assert sorted(first + rest) == list(range(14))
