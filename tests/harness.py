"""Shared checks for every executor and transport test.

- :func:`collect`: iterate a loader into plain, owned NumPy data.
- :func:`assert_same_batches`: nested equality of two lists of batches.
- :func:`assert_parallel_equals_serial`: num_workers 0, 1 and 2 give the same batches.
- :class:`LeakCheck` (the ``no_leaks`` fixture in conftest.py): no process,
  thread, file descriptor, memfd or /dev/shm entry outlives a test.
- :func:`notice_within`: how long "at once" may take on this machine now (its load).
- :func:`shm_left_behind`: the /dev/shm entries a test's processes left, not other programs'.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from typing import Any, Callable, Iterable, Iterator
from unittest import mock

import numpy as np
import psutil

from dataloader._device.structure import map_arrays


def owned(batch: Any) -> Any:
    """A deep copy of ``batch`` that holds no view of loader memory."""
    return map_arrays(batch, lambda array: np.array(array, copy=True))


def collect(loader: Iterable) -> list:
    """Every batch of one epoch, copied out of loader memory."""
    return [owned(batch) for batch in loader]


def assert_same(
    a: Any, b: Any, path: str = "batch", leaf: Callable[[Any, Any, str], bool] | None = None
) -> None:
    """Nested equality with a useful path on failure (dtypes and shapes included).

    ``leaf(a, b, path)``, if given, checks a pair of leaves its own way first and says
    whether it did (stricter comparisons reuse the walk over dicts, lists and tuples).
    """
    assert type(a) is type(b), f"{path}: {type(a).__name__} != {type(b).__name__}"
    if leaf is not None and leaf(a, b, path):
        return
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype, f"{path}: dtype {a.dtype} != {b.dtype}"
        assert a.shape == b.shape, f"{path}: shape {a.shape} != {b.shape}"
        assert np.array_equal(a, b), f"{path}: values differ"
    elif isinstance(a, dict):
        assert list(a) == list(b), f"{path}: keys {list(a)} != {list(b)}"
        for key in a:
            assert_same(a[key], b[key], f"{path}[{key!r}]", leaf)
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), f"{path}: length {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{path}[{i}]", leaf)
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def assert_same_batches(a: list, b: list) -> None:
    assert len(a) == len(b), f"{len(a)} batches != {len(b)} batches"
    for i, (x, y) in enumerate(zip(a, b)):
        assert_same(x, y, f"batch {i}")


def assert_parallel_equals_serial(
    make_loader: Callable[..., Iterable], worker_counts: Iterable[int | str] = (1, 2), **kwargs: Any
) -> list:
    """``make_loader(num_workers=n, **kwargs)`` yields the same batches for n = 0 and each count
    (or "auto")."""
    serial = collect(make_loader(num_workers=0))
    assert serial, "the serial loader produced no batch; the comparison would prove nothing"
    for count in worker_counts:
        assert_same_batches(serial, collect(make_loader(num_workers=count, **kwargs)))
    return serial


def assert_processes_stop(pids: Iterable[int], within: float) -> None:
    """Fail unless every process in ``pids`` has exited (or is a zombie) within ``within`` s."""
    processes = []
    for pid in pids:
        try:
            processes.append(psutil.Process(pid))
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(processes, timeout=within)
    running = []
    for process in alive:
        try:
            if process.status() != psutil.STATUS_ZOMBIE:
                running.append(process.pid)
        except psutil.NoSuchProcess:
            pass
    assert not running, f"workers still running: {running}"


def _fds() -> dict[str, str]:
    table = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            table[fd] = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            pass
    return table


def notice_within(quiet: float = 1.5) -> float:
    """Seconds within which an event-driven reaction (a death noticed, Ctrl-C obeyed) must land.

    ``quiet`` is the bound on an idle machine. The library reacts at once, but on a busy machine
    every process waits its turn for a core: the bound grows with the run queue per usable CPU
    (the 1-minute load average), capped at 40x, so that a test asserts the reaction and not the
    machine's speed, while a hang (no reaction at all) still fails.
    """
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    crowding = os.getloadavg()[0] / cpus
    return quiet * min(max(1.0, crowding), 40.0)


def shm_left_behind(before: set[str]) -> set[str]:
    """The /dev/shm entries new since ``before`` that no live process holds: what a test's processes left.

    /dev/shm is machine-wide: other programs' semaphores (``sem.mp-*``) and segments come and go
    while a test runs. An entry another program still uses is mapped or open in that program;
    one that our (exited or killed) processes leaked is held by nobody.
    """
    try:
        new = set(os.listdir("/dev/shm")) - before
    except OSError:
        return set()
    if not new:
        return new
    held = _shm_held_by_live_processes()
    return {name for name in new if name not in held and os.path.exists(f"/dev/shm/{name}")}


def _shm_held_by_live_processes() -> set[str]:
    held = set()
    for pid in psutil.pids():
        try:
            with open(f"/proc/{pid}/maps") as maps:
                held.update(line.split("/dev/shm/", 1)[1].split(" (deleted)")[0].strip()
                            for line in maps if "/dev/shm/" in line)
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("/dev/shm/"):
                    held.add(target[len("/dev/shm/"):])
        except OSError:  # gone, or another user's process: not ours either way
            pass
    return held


def our_shm_entries() -> set[str]:
    """Our entries in /dev/shm (the directory is machine-wide: other programs use it too)."""
    try:
        return {name for name in os.listdir("/dev/shm") if name.startswith("dataloader")}
    except OSError:
        return set()


class LeakCheck:
    """Snapshot at start; :meth:`check` fails if anything new is still around.

    Beside a service that keeps its own processes, threads and descriptors (a local Ray), pass
    ``keep_processes`` (name prefixes of its processes), ``keep_commands`` (text in the command
    line of its processes not named yet), ``thread_prefix`` (only threads whose names start
    with it are ours) and ``check_fds=False``.
    """

    def __init__(
        self, keep_processes: tuple[str, ...] = (), thread_prefix: str = "", check_fds: bool = True,
        keep_commands: tuple[str, ...] = (),
    ) -> None:
        self.keep_processes, self.thread_prefix, self.check_fds = keep_processes, thread_prefix, check_fds
        self.keep_commands = keep_commands
        self.process = psutil.Process()
        self.children = {p.pid for p in self.process.children(recursive=True)}
        self.threads = {t.ident for t in threading.enumerate()}
        self.fds = _fds()
        self.shm = our_shm_entries()

    def check(self, grace: float = 2.0) -> None:
        deadline = time.monotonic() + grace
        new_children = self._new_children()
        if new_children:
            psutil.wait_procs(new_children, timeout=max(0.0, deadline - time.monotonic()))
        leftover = [p for p in self._new_children() if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        assert not leftover, f"processes left behind: {[(p.pid, p.name()) for p in leftover]}"
        for thread in threading.enumerate():
            if thread.ident not in self.threads:
                thread.join(max(0.0, deadline - time.monotonic()))
        threads = [t.name for t in threading.enumerate() if t.ident not in self.threads and t.is_alive()
                   and t.name.startswith(self.thread_prefix)]
        assert not threads, f"threads left behind: {threads}"
        new_shm = our_shm_entries() - self.shm
        assert not new_shm, f"/dev/shm entries left behind: {sorted(new_shm)}"
        fds = {fd: target for fd, target in _fds().items() if self.fds.get(fd) != target}
        assert not (self.check_fds and fds), f"file descriptors left open: {fds}"

    def _new_children(self) -> list:
        return [p for p in self.process.children(recursive=True)
                if p.pid not in self.children and not self._kept(p)]

    def _kept(self, process: psutil.Process) -> bool:
        try:
            if self.keep_processes and process.name().startswith(self.keep_processes):
                return True
            command = " ".join(process.cmdline()) if self.keep_commands else ""
            return any(part in command for part in self.keep_commands)
        except psutil.NoSuchProcess:
            return True  # gone already


@contextlib.contextmanager
def as_worker(worker: int, workers: int) -> Iterator[None]:
    """Run code as if in worker ``worker`` of ``workers`` (0 workers: the main process):
    :func:`dataloader.get_worker_info` answers so, for every stream that shards by it."""
    import dataloader.worker
    from dataloader.worker import WorkerInfo

    info = WorkerInfo(worker, workers, 0, None) if workers else None
    with mock.patch.object(dataloader.worker, "current_worker_info", lambda: info):
        yield


def check_loader_resumes(make_loader: Callable[[], Any], column: str, cut: int, epochs: int = 2) -> None:
    """A loader saved after ``cut`` batches (counted over ``epochs`` epochs, modulo their
    batches) and resumed in a new loader gives the batches of the uninterrupted run, by the
    values of ``column``."""

    def read(loader: Any, count: int) -> list[list[int]]:
        return [[int(i) for i in batch[column]] for _ in range(count) for batch in loader]

    full = read(make_loader(), epochs)
    if not full:
        return
    cut %= len(full)
    first, head = make_loader(), []
    for _ in range(epochs):
        batches = iter(first)
        while len(head) < cut and (batch := next(batches, None)) is not None:
            head.append([int(i) for i in batch[column]])
        if len(head) == cut:
            break
    state = first.state_dict()
    resumed = make_loader()
    resumed.load_state_dict(state)
    assert head + read(resumed, epochs - state["epoch"]) == full
