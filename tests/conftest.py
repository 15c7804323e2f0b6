"""Fixtures shared by the whole suite."""

from __future__ import annotations

import gc
import multiprocessing.forkserver
import multiprocessing.resource_tracker
import os
import resource
import signal

import pytest

from dataloader._exec import resizing as resizing_module
from dataloader._tune import tuner as tuner_module
from tests.harness import LeakCheck


def pytest_collection_finish(session: pytest.Session) -> None:
    """Move what collection built (the modules, every test item) out of the collector's sight.
    The leak checks collect garbage after each test, and with the whole suite collected each
    collection walked some 150,000 objects that live to the end (0.13 s a test here, most of the
    suite's teardown time); what a test makes is still collected."""
    gc.collect()
    gc.freeze()


@pytest.fixture
def heap_unfrozen():
    """The collector as in a program that never froze its heap (the suite froze what collection
    built, and the loader leaves a program's freeze alone): for the tests of the loader's own
    freeze around fork. What is left is frozen again after the test."""
    gc.unfreeze()
    yield
    gc.collect()
    gc.freeze()


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


@pytest.fixture(autouse=True)
def process_state_restored():
    """Fail the test that leaves this process changed for the tests after it (an order
    dependence): Ctrl-C's handler, the ignored and blocked signals and the resource limits (all
    inherited by every child a later test starts), the working directory, the environment
    variables the loader reads, the garbage collector's switch."""

    def state():
        environ = {k: v for k, v in os.environ.items() if _read_by_the_loader(k)}
        limits = [resource.getrlimit(limit) for limit in (resource.RLIMIT_NOFILE, resource.RLIMIT_AS)]
        return (signal.getsignal(signal.SIGINT), _ignored_signals(), signal.pthread_sigmask(signal.SIG_BLOCK, ()),
                os.getcwd(), environ, gc.isenabled(), limits)

    before = state()
    yield
    after = state()
    names = ("SIGINT handler", "ignored signals", "signal mask", "working directory", "environment", "gc enabled",
             "resource limits")
    changed = [name for name, old, new in zip(names, before, after) if old != new]
    if "environment" in changed:
        old_env, new_env = before[4], after[4]
        changed.append(str({k: (old_env.get(k), new_env.get(k)) for k in set(old_env) | set(new_env)
                            if old_env.get(k) != new_env.get(k)}))
    assert not changed, f"the test left this process changed: {changed}"


def _read_by_the_loader(name: str) -> bool:
    """Environment variables the loader reads (other libraries set their own when first
    imported, which is no test's doing)."""
    return name.startswith(("DATALOADER_", "MGE_DATA_")) or name.endswith("_NUM_THREADS") or name in (
        "WORLD_SIZE", "RANK", "LOCAL_RANK", "TMPDIR", "XDG_CACHE_HOME")


def _ignored_signals() -> str:
    """The signals this process ignores, as the kernel has it (native code may change it
    behind Python's back); a child started later inherits them."""
    try:
        with open("/proc/self/status") as status:
            return next((line.split()[1] for line in status if line.startswith("SigIgn:")), "")
    except OSError:
        return ""


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
