"""Child scripts and process helpers for the tests that watch whole processes.

A script runs as ``python -c "...run_script()" SCENARIO START_METHOD`` from the
repository root, in a session of its own (see :func:`start_script`); it prints
a JSON line on stdout (:func:`~tests._workers._fixtures.emit`) when it has
reached the state the test wants, then carries on until the test acts.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

from tests._workers._fixtures import (
    ChecksumCollator,
    Numbers,
    PatternImages,
    SlowToUnpickle,
    StuckFrom,
    WhoLoads,
    emit,
    loader_over,
    stuck_inside_dataset_forever,
)

REPO_ROOT = Path(__file__).resolve().parents[2]


def descendants_of(pid: int | None = None) -> list[int]:
    """Pids of every process below ``pid`` (None: this one): workers, forkserver, resource tracker."""
    return sorted(p.pid for p in psutil.Process(pid).children(recursive=True))


def descendants() -> list[int]:
    return descendants_of(None)


def wait_gone(pids: list[int], timeout: float) -> list[int]:
    """Wait on pidfds until every process in ``pids`` has exited; return those still running.

    A process that has exited but was not reaped (a zombie: an orphan whose
    new parent does not reap) counts as gone.
    """
    fds: dict[int, int] = {}
    for pid in pids:
        try:
            fds[os.pidfd_open(pid)] = pid
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    try:
        while fds:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            ready, _, _ = select.select(list(fds), [], [], remaining)
            for fd in ready:
                os.close(fd)
                del fds[fd]
        return sorted(fds.values())
    finally:
        for fd in fds:
            os.close(fd)


def shm_entries() -> set[str]:
    try:
        return set(os.listdir("/dev/shm"))
    except OSError:
        return set()


def start_script(
    scenario: str, method: str, temp_dir: str | None = None, module: str = "tests._workers._scripts"
) -> subprocess.Popen:
    """Run ``module``'s ``run_script`` in a new Python process, in a session (process group) of
    its own.

    ``temp_dir`` becomes its TMPDIR: a script killed with SIGKILL cannot remove the directory
    multiprocessing made for the forkserver's socket, and it should not stay in /tmp.
    """
    code = f"from {module} import run_script; run_script()"
    env = dict(os.environ, TMPDIR=temp_dir) if temp_dir is not None else None
    return subprocess.Popen(
        [sys.executable, "-c", code, scenario, method],
        cwd=REPO_ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


class Lines:
    """JSON lines from a script's stdout, each read with a bound (select, not polling)."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.buffer = b""

    def next(self, timeout: float = 30.0) -> dict:
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buffer:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            chunk = os.read(fd, 65536) if ready else b""
            if not chunk:
                self.proc.kill()
                _, err = self.proc.communicate(timeout=10)
                raise AssertionError(
                    f"the script printed no line within {timeout} s (or exited); stderr:\n"
                    + err.decode(errors="replace")
                )
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)


def run_script(argv: list[str] | None = None) -> None:
    scenario, method = (argv or sys.argv[1:])[:2]
    # As a program started from a terminal: Ctrl-C raises KeyboardInterrupt. A suite run in the
    # background (nohup pytest &) hands its children SIGINT ignored, and Python then leaves it so.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    SCRIPTS[scenario](method)


def _announce(**extra: Any) -> None:
    emit({"pids": descendants(), "time": time.monotonic(), **extra})


def _parent_dies_in_body(method: str) -> None:
    """Block inside the training loop's body, workers idle after prefetching."""
    for _ in loader_over(Numbers(10_000), method):
        _announce()
        stuck_inside_dataset_forever()


def _parent_dies_in_next(method: str) -> None:
    """Block inside ``next()`` while both workers are stuck in the dataset (batch 2 on)."""
    for i, _ in enumerate(loader_over(StuckFrom(10_000, start=8), method)):
        if i == 1:
            _announce()


def _ctrl_c(method: str) -> None:
    """Iterate for good (a few ms per sample) until Ctrl-C; announce once both workers run."""
    seen: set[int] = set()
    for batch in loader_over(WhoLoads(10**7, delay=0.002), method):
        if len(seen) < 2:
            seen.update(batch[:, 1].tolist())
            if len(seen) == 2:
                _announce()


def _ctrl_c_while_workers_start(method: str) -> None:
    """Wait for the first batch while the workers are still unpickling the dataset."""
    for _ in loader_over(SlowToUnpickle(64), method):
        pass


_KEEP: list = []


def _exit_with_live_iterator(method: str) -> None:
    """Fall off the end of the program while an iterator, and a batch from it, are alive."""
    loader = loader_over(PatternImages(4096), method, batch_size=16, collator=ChecksumCollator())
    iterator = iter(loader)
    _KEEP.append((loader, iterator, next(iterator), next(iterator)))
    _announce()


SCRIPTS = {
    "parent-dies-in-body": _parent_dies_in_body,
    "parent-dies-in-next": _parent_dies_in_next,
    "ctrl-c": _ctrl_c,
    "ctrl-c-while-workers-start": _ctrl_c_while_workers_start,
    "exit-with-live-iterator": _exit_with_live_iterator,
}
