"""PyTorch's worker behaviour as options of the plain loader (the drop-in's defaults, issue 46):
``dispatch="round_robin"`` (worker i of n makes batches i, i + n, ...), ``seeding="worker"``
(each worker process seeded once, as it starts; no seeding without workers, nor in thread
workers, which share the generators) and
``too_many_workers="warn"``. The defaults stay this library's own."""

from __future__ import annotations

import multiprocessing
import random

import numpy as np
import pytest

from dataloader import DataLoader, Dataset, SequentialSampler, get_worker_info
from dataloader.errors import ArgumentValueError


class WhoAndWhat(Dataset):
    """Sample i: (i, the worker that made it, a draw from numpy's and Python's generators)."""

    def __len__(self) -> int:
        return 16

    def __getitem__(self, index: int) -> np.ndarray:
        info = get_worker_info()
        return np.array([index, -1 if info is None else info.id, np.random.randint(2**31), random.randrange(2**31)])


def seed_numpy_7(worker_id: int) -> None:
    np.random.seed(7)


def rows(loader: DataLoader) -> list[list[int]]:
    return [row for batch in loader for row in batch.tolist()]


@pytest.mark.parametrize("num_workers", [1, 2, 3])
def test_round_robin_dispatch_makes_batch_k_on_worker_k_mod_n(num_workers):
    loader = DataLoader(WhoAndWhat(), SequentialSampler(WhoAndWhat(), batch_size=2), num_workers=num_workers,
                        dispatch="round_robin")
    made = rows(loader)
    assert [row[0] for row in made] == list(range(16))
    assert [row[1] for row in made] == [(index // 2) % num_workers for index in range(16)]


def test_seeding_by_worker_seeds_each_worker_once_and_keeps_worker_init_fns_seed():
    sampler = SequentialSampler(WhoAndWhat(), batch_size=2)
    reseeded = rows(DataLoader(WhoAndWhat(), sampler, num_workers=2, seeding="worker", dispatch="round_robin",
                               worker_init_fn=seed_numpy_7, worker_type="process"))
    np.random.seed(7)
    expected = [np.random.randint(2**31) for _ in range(8)]  # each worker's own run of draws
    assert [row[2] for row in reseeded if row[1] == 0] == expected
    assert [row[2] for row in reseeded if row[1] == 1] == expected
    # per batch (the default), the draws follow the batch, not the worker: worker_init_fn's seed is overwritten
    per_batch = rows(DataLoader(WhoAndWhat(), sampler, num_workers=2, worker_init_fn=seed_numpy_7, seed=3,
                                worker_type="process"))
    assert [row[2] for row in per_batch if row[1] == 0] != expected


def test_seeding_by_worker_follows_the_seed_and_differs_between_workers():
    def draws(seed):
        loader = DataLoader(WhoAndWhat(), SequentialSampler(WhoAndWhat(), batch_size=2), num_workers=2,
                            seeding="worker", dispatch="round_robin", seed=seed, worker_type="process")
        return rows(loader)

    first = draws(5)
    assert first == draws(5) and first != draws(6)
    assert {row[2] for row in first if row[1] == 0}.isdisjoint({row[2] for row in first if row[1] == 1})


def test_seeding_by_worker_without_workers_draws_from_your_generators():
    np.random.seed(11)
    expected = [np.random.randint(2**31) for _ in range(16)]
    np.random.seed(11)
    loader = DataLoader(WhoAndWhat(), SequentialSampler(WhoAndWhat(), batch_size=4), seeding="worker", seed=1)
    assert [row[2] for row in rows(loader)] == expected


def test_too_many_workers_is_refused_by_default_and_warned_about_on_request():
    with pytest.raises(ArgumentValueError, match="must be at most"):
        DataLoader(WhoAndWhat(), num_workers=100_000)
    with pytest.warns(UserWarning, match="excessive worker creation might get DataLoader running slow or even freeze"):
        loader = DataLoader(WhoAndWhat(), num_workers=100_000, too_many_workers="warn")
    assert loader.num_workers == 100_000


@pytest.mark.parametrize("name", ["seeding", "dispatch", "too_many_workers"])
def test_the_options_take_their_values_only(name):
    with pytest.raises(ArgumentValueError, match=f"`{name}` must be one of"):
        DataLoader(WhoAndWhat(), **{name: "sometimes"})


def test_seeding_by_worker_draws_anew_each_epoch_and_alike_in_each_run():
    def epochs(seed):
        loader = DataLoader(WhoAndWhat(), SequentialSampler(WhoAndWhat(), batch_size=4), num_workers=2,
                            seeding="worker", dispatch="round_robin", seed=seed, worker_type="process")
        return [[row[2] for row in rows(loader)] for _ in range(3)]

    first = epochs(9)
    assert first == epochs(9)
    assert first[0] != first[1] != first[2] != first[0]


@pytest.mark.parametrize("in_order", [True, False])
def test_round_robin_hands_out_every_batch_once_in_either_order(in_order):
    loader = DataLoader(WhoAndWhat(), SequentialSampler(WhoAndWhat(), batch_size=1), num_workers=3,
                        dispatch="round_robin", in_order=in_order, prefetch_factor=1)
    made = rows(loader)
    assert sorted(row[0] for row in made) == list(range(16))
    if in_order:
        assert [row[1] for row in made] == [index % 3 for index in range(16)]


class FirstWaitsForSixth(Dataset):
    """Sample 0 waits until sample 6 is made (by another worker): in order, worker 0's turn would
    wait for it; out of order, its turn passes while it is busy, so sample 6 comes and frees it."""

    def __init__(self) -> None:
        self.sixth_made = multiprocessing.get_context().Event()

    def __len__(self) -> int:
        return 12

    def __getitem__(self, index: int) -> np.ndarray:
        if index == 6:
            self.sixth_made.set()
        return np.array([index, self.sixth_made.wait(60) if index == 0 else True])


def test_round_robin_out_of_order_passes_a_busy_workers_turn():
    dataset = FirstWaitsForSixth()
    loader = DataLoader(dataset, SequentialSampler(dataset, batch_size=1), num_workers=3,
                        dispatch="round_robin", in_order=False, prefetch_factor=1)
    made = rows(loader)
    assert sorted(row[0] for row in made) == list(range(12))
    assert all(row[1] for row in made)  # sample 0 was freed by sample 6, not by its wait's end
