"""One local Ray instance for the session, and a leak check that knows what Ray keeps."""

from __future__ import annotations

import gc

import pytest

from tests.harness import LeakCheck

# Ray's own long-lived processes: idle workers it keeps for reuse, and its private singletons
# (``ray::_StatsActor`` and the like). Anything else it started must be gone after a loader.
_RAY_KEEPS = ("ray::IDLE", "ray::_")
# A Ray worker still starting is named "python" until it sets its title (ray::IDLE): seen left
# "behind" on a loaded machine, where that takes longer than the check's grace.
_RAY_STARTING = ("ray/_private/workers/default_worker.py",)


@pytest.fixture(scope="session")
def ray_local():
    """``ray.init(num_cpus=2)`` with a small object store, shut down at the end of the session."""
    ray = pytest.importorskip("ray", reason="Ray Data is not installed: pip install 'dataloader[ray]'")
    ray.init(
        num_cpus=2, object_store_memory=128 * 2**20, include_dashboard=False, log_to_driver=False,
        configure_logging=False,
    )
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield ray
    ray.shutdown()


@pytest.fixture
def no_leaks_beside_ray(ray_local):
    """Fail the test if a process, a thread of ours or our shared memory outlives it."""
    check = LeakCheck(keep_processes=_RAY_KEEPS, thread_prefix="dataloader", check_fds=False,
                      keep_commands=_RAY_STARTING)
    yield check
    gc.collect()
    check.check(grace=10.0)
