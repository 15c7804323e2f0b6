"""A sample that kills its worker (segfault, abort) under on_error="skip"/"replace": found by
probes, left out or replaced like a sample that raised, and the epoch goes on in a fresh worker.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

import dataloader
from dataloader import DataLoader, SequentialSampler, RandomSampler
from dataloader._exec.dispatch import Dispatcher
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


# Persistent workers, and sample 7 kills its worker in every epoch: a task sent to a worker that
# had died a moment before (its death not yet seen) was lost with the failed send, and the
# epoch ended early and silently, its later batches held back for the lost one (issue 45, item
# 1); or the death, met while handing out a batch, reached the user under "skip". Warm workers
# and batches of 8 lost a task in about half the epochs before the fix (1 worker: about one in
# ten, so the cases use 2 and 3): 10 epochs miss it about once in a thousand runs a case.
WHOLE_EPOCHS = 10


def assert_every_epoch_whole(how: str, on_error: str, num_workers: int, epochs: int = WHOLE_EPOCHS) -> None:
    """Each of ``epochs`` epochs of a persistent loader whose sample 7 kills the worker reading
    it (``how``) gives the batches a serial loader gives, where sample 7 raises instead."""
    dataset = Killers(40, {7: how})

    def make(workers):
        return DataLoader(
            dataset, SequentialSampler(dataset, batch_size=8), num_workers=workers, on_error=on_error,
            persistent_workers=workers > 0, multiprocessing_context="fork", seed=5,
        )

    serial, parallel = make(0), make(num_workers)
    want = 39 if on_error == "skip" else 40
    try:
        for epoch in range(epochs):
            expected, got = collect(serial), collect(parallel)
            delivered = [int(b[0]) for batch in got for b in batch]
            assert len(delivered) == want and 7 not in delivered, (
                f"epoch {epoch} of {epochs}: {len(delivered)} samples, not {want}: {delivered}"
            )
            assert_same_batches(expected, got)
            assert parallel.stats().failed_samples == 1
    finally:
        parallel.close()


@pytest.mark.parametrize(
    "how, on_error, num_workers",
    [("SIGABRT", "skip", 2), ("SIGKILL", "replace", 2), ("exit", "skip", 3), ("SIGSEGV", "replace", 3)],
)
def test_a_killed_worker_never_ends_a_later_epoch_early(no_leaks, how, on_error, num_workers):
    assert_every_epoch_whole(how, on_error, num_workers)


_IN_A_PRIVATE_SHM = """
import sys
sys.path.insert(0, {root!r})
from tests._exec.test_recovery import assert_every_epoch_whole
assert_every_epoch_whole("SIGABRT", "skip", 2)
print("whole")
"""


def test_a_killed_worker_never_ends_a_later_epoch_early_with_a_private_empty_dev_shm(tmp_path):
    """The same, in a mount namespace of its own with an empty tmpfs on /dev/shm: the issue saw
    the race's window depend on what /dev/shm holds and how fast it answers."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare is not installed")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    script = tmp_path / "whole_epochs.py"
    script.write_text(_IN_A_PRIVATE_SHM.format(root=root))
    command = f"mount -t tmpfs -o size=256m tmpfs /dev/shm && exec {sys.executable} {script}"
    done = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", command], capture_output=True, text=True, timeout=120
    )
    refused = ("Operation not permitted", "permission denied", "cannot mount")
    if done.returncode != 0 and any(text in done.stderr.lower() for text in map(str.lower, refused)):
        pytest.skip(f"a private /dev/shm needs unshare and mount (root): {done.stderr.strip().splitlines()[-1]}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["whole"]


def test_an_epoch_that_lost_a_task_raises_rather_than_ending_short(no_leaks, monkeypatch):
    """Were a task ever lost again, the batches held back behind it must not vanish with a
    StopIteration: the epoch says it is incomplete."""
    real = Dispatcher._next_tasks

    def losing_task_1(self, size):
        tasks = real(self, size)
        return [task for task in tasks if task.index != 1] or real(self, size)

    monkeypatch.setattr(Dispatcher, "_next_tasks", losing_task_1)
    dataset = Killers(40, {})
    sampler = SequentialSampler(dataset, batch_size=8)
    loader = DataLoader(dataset, sampler, num_workers=2, multiprocessing_context="fork")
    with pytest.raises(dataloader.DataLoaderError, match="held back waiting for batch 1, which no worker answered"):
        collect(loader)


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
