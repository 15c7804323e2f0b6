"""A worker whose channel closes long before its process is gone (stuck in an atexit handler or a
C destructor, or a sample that closed its descriptors) is a death like any other: a typed
WorkerDiedError naming it under on_error="raise", and the bad-sample recovery under "skip".

The samples block until the process is killed (see tests/_exec/_killers.py), so nothing here
depends on how slow a slow exit is.
"""

from __future__ import annotations

import threading

import pytest

import dataloader
from dataloader import DataLoader, SequentialSampler
from tests._exec._killers import HangsUpInThread, Killers
from tests.harness import collect


def _loader(dataset, on_error, **options):
    sampler = SequentialSampler(dataset, batch_size=8)
    return DataLoader(dataset, sampler, num_workers=2, on_error=on_error, seed=5, **options)


@pytest.mark.parametrize("how", ["hang up", "close fds"])
def test_a_worker_that_hangs_up_and_lingers_raises_worker_died_naming_it(no_leaks, how):
    """Before: "hang up" let the raw ConnectionResetError through after 1 s; "close fds" (its
    exit sentinel fired too) hung in multiprocessing's blocking waitpid until the worker exited."""
    dataset = Killers(40, {13: how})
    with pytest.raises(dataloader.WorkerDiedError) as caught:
        collect(_loader(dataset, "raise", multiprocessing_context="fork"))
    error = caught.value
    assert error.worker_id in (0, 1) and error.pid is not None
    assert f"DataLoader worker {error.worker_id} (pid {error.pid}) stopped answering" in str(error)
    assert "the main process killed it (SIGKILL)" in str(error)
    assert 13 in error.indices
    assert "[8, 9, 10, 11, 12, 13, 14, 15]" in str(error)


def test_under_skip_a_sample_whose_worker_hangs_up_is_left_out_and_the_rest_delivered_once(no_leaks):
    """The worker and then its probe close their descriptors and linger: both are deaths, so the
    probe names sample 13, and every other sample comes exactly once."""
    dataset = Killers(40, {13: "close fds"})
    loader = _loader(dataset, "skip", multiprocessing_context="fork")
    delivered = sorted(int(sample[0]) for batch in collect(loader) for sample in batch)
    assert delivered == sorted(set(range(40)) - {13})
    records = loader.stats().failures
    assert [(r.index, r.error, r.signal) for r in records] == [(13, "WorkerDiedError", "hung up without exiting")]


def test_a_thread_worker_whose_channel_closes_raises_worker_died(no_leaks):
    """Before: the thread, still running, made the 1 s wait pass and the raw EOFError through."""
    release = threading.Event()
    dataset = HangsUpInThread(40, 13, release)
    try:
        with pytest.raises(dataloader.WorkerDiedError) as caught:
            collect(_loader(dataset, "raise", worker_type="thread"))
    finally:
        release.set()
    error = caught.value
    assert error.worker_id in (0, 1)
    assert f"worker {error.worker_id} (thread dataloader-thread-worker-{error.worker_id}) stopped answering" in str(error)
    assert 13 in error.indices
