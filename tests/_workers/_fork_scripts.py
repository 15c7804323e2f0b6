"""Child scripts for the fork-safety tests: a program that calls ``os.fork()`` mid-epoch.

A script runs as ``python -c "...run_script()" SCENARIO START_METHOD`` from the
repository root, in a session of its own (:func:`~tests._workers._scripts.start_script`
does the same for the other scripts), and prints JSON lines on stdout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

import numpy as np

from dataloader import Dataset
from tests._workers._fixtures import Numbers, emit, loader_over
from tests._workers._scripts import start_script

SAMPLES = 400
EXPECTED = list(range(0, SAMPLES, 4))  # the first index of each batch of 4, in order
_KEEP: list = []  # what the child exits with still alive: its exit collects it


class PidOf(Dataset):
    """Sample ``i`` is ``np.array([i, pid of the process that loaded it])``."""

    def __len__(self) -> int:
        return SAMPLES

    def __getitem__(self, index: int) -> np.ndarray:
        return np.array([index, os.getpid()])


def _fork_then_finish(method: str, child: Any, **options: Any) -> None:
    """Take 3 batches, fork a child that runs ``child(loader, iterator)`` and exits normally,
    then finish the epoch (and one more) in the parent; print what the parent saw."""
    loader = loader_over(Numbers(SAMPLES), method, **options)
    iterator = iter(loader)
    got = [int(next(iterator)[0, 0]) for _ in range(3)]
    pid = os.fork()
    if pid == 0:
        child(loader, iterator)
        _KEEP.append((loader, iterator))
        return  # the interpreter exits normally: atexit handlers, then garbage collection
    _, status = os.waitpid(pid, 0)
    result: dict[str, Any] = {"child_exit": os.waitstatus_to_exitcode(status)}
    try:
        got += [int(batch[0, 0]) for batch in iterator]
        result["again"] = [int(batch[0, 0]) for batch in loader] == EXPECTED
    except Exception as error:  # noqa: BLE001 - the test reports what went wrong
        result["error"] = f"{type(error).__name__}: {error}"
    result["intact"] = got == EXPECTED
    emit(result)
    loader.close()


def _child_exits(method: str) -> None:
    _fork_then_finish(method, lambda loader, iterator: None)


def _child_closes(method: str) -> None:
    def close(loader: Any, iterator: Any) -> None:
        iterator.close()
        loader.close()

    _fork_then_finish(method, close, persistent_workers=True)


def _parent_killed(method: str) -> None:
    """Fork a child that sleeps, then block in the training loop's body until killed."""
    iterator = iter(loader_over(PidOf(), method))  # alive until the script is killed
    workers: set[int] = set()
    while len(workers) < 2:
        workers.update(int(pid) for pid in next(iterator)[:, 1])
    child = os.fork()
    if child == 0:
        time.sleep(60)
        os._exit(0)
    emit({"workers": sorted(workers), "child": child})
    time.sleep(600)


def _child_exits_threads(method: str) -> None:
    _fork_then_finish(method, lambda loader, iterator: None, worker_type="thread")


SCRIPTS = {
    "child-exits": _child_exits,
    "child-closes": _child_closes,
    "child-exits-threads": _child_exits_threads,
    "parent-killed": _parent_killed,
}


def run_script() -> None:
    scenario, method = sys.argv[1:3]
    SCRIPTS[scenario](method)


def start(scenario: str, method: str, temp_dir: str | None = None) -> subprocess.Popen:
    return start_script(scenario, method, temp_dir, module="tests._workers._fork_scripts")


def report(proc: subprocess.Popen, timeout: float = 60) -> tuple[dict, str]:
    """The script's last JSON line and its stderr, once it has exited."""
    out, err = proc.communicate(timeout=timeout)
    lines = [line for line in out.decode().splitlines() if line.startswith("{")]
    stderr = err.decode(errors="replace")
    assert lines, f"the script printed nothing (exit {proc.returncode}):\n{stderr}"
    return json.loads(lines[-1]), stderr
