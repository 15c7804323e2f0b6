"""Random augmentations: a seed fixes them for any num_workers; without one, workers never repeat."""

from __future__ import annotations

import functools
import random

import numpy as np
import pytest

from dataloader import ArrayDataset, DataLoader, RandomSampler, SequentialSampler, StreamSampler
from dataloader.transform import Compose
from tests.harness import assert_parallel_equals_serial, collect

from ._fixtures import IndexDataset, RandomAugment, RangeStream, RngAugment


def _map_loader(transform, seed=None, length=40, batch_size=4, **kwargs):
    dataset = IndexDataset(length)
    sampler = RandomSampler(dataset, batch_size=batch_size, seed=11)
    return DataLoader(dataset, sampler, transform=transform, seed=seed, **kwargs)


def _assert_draws_vary(batches, keys=("py", "np")):
    """The transform really drew random numbers (else equality would prove nothing)."""
    for key in keys:
        values = np.concatenate([np.asarray(b[key]).reshape(len(b["index"]), -1) for b in batches])
        assert len(np.unique(values, axis=0)) == len(values), f"`{key}` draws repeat"


def test_seed_fixes_random_and_numpy_draws_for_any_num_workers(no_leaks, tuned_every_batch, start_method):
    make = functools.partial(_map_loader, RandomAugment(), seed=123, multiprocessing_context=start_method)
    serial = assert_parallel_equals_serial(make, worker_counts=(1, 2, "auto"))
    _assert_draws_vary(serial)


@pytest.mark.parametrize("worker_type", ["process", "thread"])
def test_seed_fixes_batch_rng_draws_for_any_num_workers_and_worker_type(no_leaks, tuned_every_batch, worker_type):
    make = functools.partial(
        _map_loader, RngAugment(), seed=77, worker_type=worker_type, multiprocessing_context="fork"
    )
    serial = assert_parallel_equals_serial(make, worker_counts=(1, 2, 3, "auto"))
    _assert_draws_vary(serial, keys=("rng",))


def test_unseeded_thread_workers_draw_differently_from_batch_rng(no_leaks):
    dataset = IndexDataset(16)
    loader = DataLoader(dataset, SequentialSampler(dataset, batch_size=4), transform=RngAugment(),
                        num_workers=2, worker_type="thread")
    batches = collect(loader)
    assert not np.array_equal(batches[0]["rng"], batches[1]["rng"])
    _assert_draws_vary(batches, keys=("rng",))


def test_seed_fixes_torch_draws_for_any_num_workers(no_leaks, start_method):
    pytest.importorskip("torch", reason="torch is not installed: torch seeding cannot be checked")
    from ._torch_fixtures import TorchAugment

    transform = Compose([RandomAugment(), TorchAugment()])
    make = functools.partial(_map_loader, transform, seed=123, multiprocessing_context=start_method)
    serial = assert_parallel_equals_serial(make, worker_counts=(1, 2))
    _assert_draws_vary(serial, keys=("py", "np", "torch"))


def test_seed_fixes_draws_for_a_stream_read_by_the_main_process(no_leaks):
    def make(**kwargs):
        return DataLoader(RangeStream(30), StreamSampler(batch_size=4), transform=RandomAugment(), seed=9, **kwargs)

    serial = assert_parallel_equals_serial(make, worker_counts=(1, 3), multiprocessing_context="fork")
    _assert_draws_vary(serial)


def test_different_seeds_give_different_draws():
    a = collect(_map_loader(RandomAugment(), seed=1))
    b = collect(_map_loader(RandomAugment(), seed=2))
    assert not np.array_equal(a[0]["np"], b[0]["np"])


def test_seed_gives_new_draws_each_epoch(no_leaks):
    loader = _map_loader(RandomAugment(), seed=5, num_workers=2, multiprocessing_context="fork")
    first, second = collect(loader), collect(loader)
    assert not np.array_equal(np.concatenate([b["np"] for b in first]), np.concatenate([b["np"] for b in second]))


def test_unseeded_workers_draw_differently(no_leaks, start_method):
    # The main process has used its generators (as training scripts do): forked
    # workers inherit that state, and would repeat each other's draws unless
    # the loader seeds them apart. (NumPy seeds its global state on first use,
    # so without this draw the forked children would differ by luck.)
    np.random.random()
    random.random()
    # Every sample is the same but for its index, so the batches differ only by the draws.
    dataset = IndexDataset(16)
    loader = DataLoader(
        dataset, SequentialSampler(dataset, batch_size=4), transform=RandomAugment(), num_workers=2,
        multiprocessing_context=start_method,
    )
    batches = collect(loader)
    # Batch 0 and batch 1 are made by different workers.
    assert not np.array_equal(batches[0]["np"], batches[1]["np"]), "two workers drew the same numbers"
    assert not np.array_equal(batches[0]["py"], batches[1]["py"]), "two workers drew the same numbers from `random`"
    _assert_draws_vary(batches)


def test_unseeded_loaders_and_epochs_draw_differently(no_leaks):
    loader = _map_loader(RandomAugment(), num_workers=2, persistent_workers=True, multiprocessing_context="fork")
    try:
        first, second = collect(loader), collect(loader)
    finally:
        loader.close()
    other = collect(_map_loader(RandomAugment(), num_workers=2, multiprocessing_context="fork"))
    draws = [np.concatenate([b["np"] for b in epoch]) for epoch in (first, second, other)]
    assert not np.array_equal(draws[0], draws[1]), "two epochs of one loader drew the same numbers"
    assert not np.array_equal(draws[0], draws[2]), "two unseeded loaders drew the same numbers"


class _Seeded(Exception):
    pass


def _refuse(*args, **kwargs):
    raise _Seeded("seeded")


def test_a_serial_batch_of_an_array_dataset_with_nothing_to_run_is_not_seeded(monkeypatch):
    # No code of yours runs while such a batch is made (no transform, the default collator, an
    # ArrayDataset of numbers): nothing can draw, so the per-batch seeding is skipped.
    monkeypatch.setattr(random, "seed", _refuse)
    arrays = ArrayDataset(np.arange(12.0), np.arange(12))
    assert len(collect(DataLoader(arrays, batch_size=4, seed=3))) == 3

    class Mine(IndexDataset):  # your __getitem__ could draw: seeded
        pass

    with pytest.raises(_Seeded):
        collect(DataLoader(Mine(12), batch_size=4, seed=3))


@pytest.mark.skipif(not hasattr(np.random, "set_bit_generator"), reason="numpy < 1.25 copies the state")
def test_serial_batches_never_copy_numpys_global_state(monkeypatch):
    # get_state/set_state of numpy.random's 624-word state cost ~100 us a batch, a third of a
    # small serial batch (issue 45); the draws are the ones seed_all gives workers all the same.
    expected = collect(_map_loader(RandomAugment(), seed=123))
    monkeypatch.setattr(np.random, "get_state", _refuse)
    monkeypatch.setattr(np.random, "set_state", _refuse)
    got = collect(_map_loader(RandomAugment(), seed=123))
    assert all(np.array_equal(a["np"], b["np"]) and np.array_equal(a["py"], b["py"]) for a, b in zip(got, expected))
    _assert_draws_vary(got)
