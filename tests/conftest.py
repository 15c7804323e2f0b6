"""Fixtures shared by the whole suite."""

from __future__ import annotations

import gc

import pytest

from tests.harness import LeakCheck


@pytest.fixture
def no_leaks():
    """Fail the test if it leaves a process, thread, descriptor or /dev/shm entry behind."""
    check = LeakCheck()
    yield check
    gc.collect()
    check.check()


@pytest.fixture(params=["fork", "spawn", "forkserver"])
def start_method(request):
    """Each multiprocessing start method in turn."""
    return request.param
