"""A sample that kills its worker (segfault, abort) under on_error="skip"/"replace": found by
probes, left out or replaced like a sample that raised, and the epoch goes on in a fresh worker.
"""

from __future__ import annotations

import json

import pytest

import dataloader
from dataloader import DataLoader, SequentialSampler, RandomSampler
from tests._exec._killers import KillInTransform, Killers
from tests.harness import assert_same_batches, collect

KILLS = {13: "SIGSEGV", 27: "SIGABRT"}


def _loader(dataset, num_workers, on_error, **options):
    sampler = RandomSampler(dataset, batch_size=8, seed=3)
    return DataLoader(dataset, sampler, num_workers=num_workers, on_error=on_error, max_errors=10, seed=5, **options)


@pytest.mark.parametrize("on_error", ["skip", "replace"])
def test_killed_samples_give_the_batches_of_samples_that_raised(no_leaks, start_method, on_error):
    dataset = Killers(48, KILLS)
    loader = _loader(dataset, 2, on_error, multiprocessing_context=start_method)
    serial = _loader(dataset, 0, on_error)
    expected = collect(serial)  # in this process the samples raise instead
    got = collect(loader)
    assert_same_batches(expected, got)
    records = loader.stats().failures
    assert sorted(r.index for r in records) == sorted(r.index for r in serial.stats().failures)
    assert {r.index for r in records if r.signal} == {13, 27}
    assert {r.signal for r in records if r.signal} == {"SIGSEGV", "SIGABRT"}
    assert all(r.error == "WorkerDiedError" for r in records if r.signal)
    delivered = sorted(int(b[0]) for batch in got for b in batch)
    assert 13 not in delivered and 27 not in delivered
    if on_error == "skip":
        assert delivered == sorted(set(range(48)) - set(KILLS))
    else:
        assert all(len(batch) == 8 for batch in got)


@pytest.mark.parametrize("num_workers", [1, 4])
def test_any_worker_count_gives_the_same_batches(no_leaks, num_workers):
    dataset = Killers(48, KILLS)
    expected = collect(_loader(dataset, 0, "replace"))
    assert_same_batches(expected, collect(_loader(dataset, num_workers, "replace", multiprocessing_context="fork")))


def test_a_sample_that_kills_in_the_transform_is_found_at_that_stage(no_leaks, tmp_path):
    dataset = Killers(32, {})
    log = tmp_path / "errors.jsonl"
    sampler = SequentialSampler(dataset, batch_size=8)
    loader = DataLoader(
        dataset, sampler, transform=KillInTransform({5, 20}), num_workers=2, on_error="skip",
        max_errors=5, error_log=str(log), multiprocessing_context="fork",
    )
    got = sorted(int(b[0]) - 1 for batch in collect(loader) for b in batch)
    assert got == sorted(set(range(32)) - {5, 20})
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert sorted((line["index"], line["stage"], line["signal"]) for line in lines) == [
        (5, "transform", "SIGABRT"), (20, "transform", "SIGABRT"),
    ]


def test_persistent_workers_go_on_to_the_next_epoch(no_leaks):
    dataset = Killers(40, {9: "SIGABRT"})
    loader = _loader(dataset, 2, "skip", persistent_workers=True, multiprocessing_context="fork")
    first, second = collect(loader), collect(loader)
    for epoch in (first, second):
        assert sorted(int(b[0]) for batch in epoch for b in batch) == sorted(set(range(40)) - {9})


def test_under_raise_the_worker_death_names_the_indices_it_was_making(no_leaks):
    dataset = Killers(40, {13: "SIGABRT"})
    loader = DataLoader(dataset, SequentialSampler(dataset, batch_size=8), num_workers=2, multiprocessing_context="fork")
    with pytest.raises(dataloader.WorkerDiedError) as caught:
        collect(loader)
    assert 13 in caught.value.indices
    assert "[8, 9, 10, 11, 12, 13, 14, 15]" in str(caught.value)
    assert "on_error='skip'" in str(caught.value)


def test_a_death_no_sample_explains_is_raised(no_leaks):
    """Killed from outside (here: once, by the dataset on its first read in a worker, which a
    probe does not repeat): no probe finds a culprit, so it is the WorkerDiedError it was."""
    dataset = _KilledOnce(32)
    loader = DataLoader(
        dataset, SequentialSampler(dataset, batch_size=8), num_workers=2, on_error="skip",
        multiprocessing_context="fork",
    )
    with pytest.raises(dataloader.WorkerDiedError):
        collect(loader)


class _KilledOnce(Killers):
    def __init__(self, n: int) -> None:
        super().__init__(n, {})

    def __getitem__(self, index: int):
        import os
        import signal as signals

        from dataloader import get_worker_info

        info = get_worker_info()
        if index == 10 and info is not None and info.id == 1 and not _is_probe():
            os.kill(os.getpid(), signals.SIGKILL)
        return super().__getitem__(index)


def _is_probe() -> bool:
    import multiprocessing

    return multiprocessing.current_process().name == "dataloader-probe"
