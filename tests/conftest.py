"""Fixtures shared by the whole suite."""

from __future__ import annotations

import gc
import multiprocessing.forkserver
import multiprocessing.resource_tracker

import pytest

from dataloader._exec import resizing as resizing_module
from dataloader._tune import tuner as tuner_module
from tests.harness import LeakCheck


@pytest.fixture(scope="session", autouse=True)
def multiprocessing_helpers():
    """Start multiprocessing's own helper processes before any leak snapshot is taken.

    The spawn and forkserver start methods start, once per interpreter, a
    resource tracker and a fork server that live until the interpreter exits.
    They are not the loader's, but the first test to start a worker that way
    would otherwise see them as leaked processes and descriptors.
    """
    multiprocessing.resource_tracker.ensure_running()
    multiprocessing.forkserver.ensure_running()


@pytest.fixture
def no_leaks():
    """Fail the test if it leaves a process, thread, descriptor or /dev/shm entry behind."""
    check = LeakCheck()
    yield check
    gc.collect()
    check.check()


@pytest.fixture
def tuned_every_batch(monkeypatch):
    """num_workers="auto": the autotuner decides after every batch handed out (once the workers
    it added last have started), so the pool changes size however short the run."""
    monkeypatch.setattr(tuner_module, "WINDOW_SECONDS", 0.0)
    monkeypatch.setattr(tuner_module, "WINDOW_BATCHES", 1)
    # A worker's memory once an epoch: reading its smaps every ten one-batch windows would be
    # most of what these runs spend.
    monkeypatch.setattr(tuner_module, "MEASURE_EVERY", 10**9)
    # A worker just added counts as started after its first batch (a slow start under spawn on a
    # busy machine must not leave the epoch to end before the next window).
    monkeypatch.setattr(resizing_module, "WARM_TASKS", 1)


@pytest.fixture(params=["fork", "spawn", "forkserver"])
def start_method(request):
    """Each multiprocessing start method in turn."""
    return request.param
