"""One local Ray instance for the session, and a leak check that knows what Ray keeps."""

from __future__ import annotations

import gc
import os
import threading
import time

import psutil
import pytest

# Ray's own long-lived processes: idle workers it keeps for reuse, and its private singletons
# (``ray::_StatsActor`` and the like). Anything else it started must be gone after a loader.
_RAY_KEEPS = ("ray::IDLE", "ray::_")


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


class RayLeakCheck:
    """What a test left behind of ours, Ray's own processes and threads set aside."""

    def __init__(self) -> None:
        self.process = psutil.Process()
        self.pids = {p.pid for p in self.process.children(recursive=True)}
        self.threads = {t.ident for t in threading.enumerate()}

    def check(self, grace: float = 10.0) -> None:
        deadline = time.monotonic() + grace
        while True:
            gc.collect()
            problems = self._problems()
            if not problems or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert not problems, problems

    def _problems(self) -> list[str]:
        problems = [f"process {pid} {name}" for pid, name in self._new_processes()]
        problems += [
            f"thread {t.name}" for t in threading.enumerate()
            if t.ident not in self.threads and t.name.startswith("dataloader") and t.is_alive()
        ]
        problems += [f"/dev/shm/{n}" for n in os.listdir("/dev/shm") if n.startswith("dataloader")]
        return problems

    def _new_processes(self) -> list[tuple[int, str]]:
        found = []
        for p in self.process.children(recursive=True):
            try:
                if p.pid in self.pids or p.status() == psutil.STATUS_ZOMBIE:
                    continue
                name = p.name()
            except psutil.NoSuchProcess:
                continue
            if not name.startswith(_RAY_KEEPS):
                found.append((p.pid, name))
        return found


@pytest.fixture
def no_leaks_beside_ray(ray_local):
    """Fail the test if a process, a thread of ours or our shared memory outlives it."""
    check = RayLeakCheck()
    yield check
    check.check()
