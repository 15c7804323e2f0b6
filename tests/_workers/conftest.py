"""Fixtures of the worker tests."""

from __future__ import annotations

import multiprocessing.forkserver
import multiprocessing.resource_tracker

import pytest


@pytest.fixture(scope="session", autouse=True)
def multiprocessing_helpers():
    """Start multiprocessing's own helper processes before any leak snapshot is taken.

    The forkserver and the resource tracker are started by the first spawn or
    forkserver worker and live as long as the test process, by design of
    multiprocessing; the ``no_leaks`` fixture would otherwise blame them on
    whichever test happened to come first.
    """
    multiprocessing.resource_tracker.ensure_running()
    multiprocessing.forkserver.ensure_running()
    yield
