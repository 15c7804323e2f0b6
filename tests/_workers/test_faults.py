"""Faults: a worker dies, the main process dies, a worker hangs past ``timeout``.

Each fault is triggered from inside the dataset, in a worker, at a chosen
sample; the worker writes its id, pid and the time just before the fault so
the test can check the error names the real worker and came fast enough.
"""

from __future__ import annotations

import os
import re
import signal
import time

import pytest

import dataloader
from tests._workers._fixtures import (
    DieAt,
    Numbers,
    StuckAt,
    batch_of,
    loader_over,
    read_report,
)
from tests._workers._scripts import Lines, shm_entries, start_script, wait_gone

# The 1 s bound the robustness guarantee promises, plus a margin for a 2-core CI machine.
NOTICE_WITHIN = 1.5

# Sample 5 lies in batch 1, which the second worker usually makes (tests read the real one
# from the report).
FAULT_INDEX = 5

_MEMORY_SENTENCE = re.compile(
    r"Memory: (cgroup v\d \S+ uses [\d.]+ MiB of its [\d.]+ MiB limit"
    r"|no cgroup memory limit; the system uses [\d.]+ MiB of [\d.]+ MiB) \(\d+%\)"
)


def _iterate_until_error(loader):
    """Consume batches as fast as they come; return (error, when it was raised)."""
    with pytest.raises(dataloader.WorkerDiedError) as info:
        for _ in loader:
            pass
    return info.value, time.monotonic()


# -- a worker dies -------------------------------------------------------------


@pytest.mark.parametrize(
    "how, expected",
    [
        ("SIGKILL", "killed by signal SIGKILL"),
        ("SIGSEGV", "killed by signal SIGSEGV"),
        ("exit3", "exited with code 3"),
    ],
)
def test_worker_death_is_reported_at_once(no_leaks, start_method, tmp_path, how, expected):
    report_path = str(tmp_path / "fault.json")
    loader = loader_over(DieAt(64, FAULT_INDEX, how, report_path), start_method)

    error, raised_at = _iterate_until_error(loader)

    report = read_report(report_path)
    assert raised_at - report["time"] < NOTICE_WITHIN
    assert isinstance(error, RuntimeError)
    message = str(error)
    assert message.startswith(
        f"DataLoader worker {report['worker_id']} (pid {report['pid']}) exited unexpectedly: {expected}"
    ), message


def test_worker_died_error_carries_the_worker_id_and_pid(no_leaks, tmp_path):
    report_path = str(tmp_path / "fault.json")
    loader = loader_over(DieAt(64, FAULT_INDEX, "exit3", report_path), "fork")

    error, _ = _iterate_until_error(loader)

    report = read_report(report_path)
    assert (error.worker_id, error.pid) == (report["worker_id"], report["pid"])


def test_sigkill_names_memory_use_against_the_limit(no_leaks, tmp_path):
    report_path = str(tmp_path / "fault.json")
    loader = loader_over(DieAt(64, FAULT_INDEX, "SIGKILL", report_path), "fork")

    error, _ = _iterate_until_error(loader)

    assert "OOM" in str(error)
    assert _MEMORY_SENTENCE.search(str(error)), str(error)


def test_sigsegv_names_native_code(no_leaks, tmp_path):
    loader = loader_over(DieAt(64, FAULT_INDEX, "SIGSEGV", str(tmp_path / "fault.json")), "fork")

    error, _ = _iterate_until_error(loader)

    assert "Native code crashed" in str(error)


def test_the_epoch_ends_after_a_worker_death_and_the_other_worker_stops(no_leaks, tmp_path):
    loader = loader_over(DieAt(64, FAULT_INDEX, "exit3", str(tmp_path / "fault.json")), "fork")
    iterator = iter(loader)
    with pytest.raises(dataloader.WorkerDiedError):
        for _ in iterator:
            pass

    no_leaks.check(grace=NOTICE_WITHIN)  # the surviving worker is stopped, not orphaned
    with pytest.raises(StopIteration):  # the epoch is over, not wedged
        next(iterator)


def test_a_new_epoch_after_a_worker_died_starts_fresh_workers(no_leaks, tmp_path):
    report_path = str(tmp_path / "fault.json")
    dataset = DieAt(64, FAULT_INDEX, "SIGKILL", report_path)
    loader = loader_over(dataset, "fork")
    _iterate_until_error(loader)

    dataset.index = -1  # no fault this time
    assert [int(b[0, 0]) for b in loader] == list(range(0, 64, 4))


# -- the main process dies -----------------------------------------------------


@pytest.mark.parametrize("scenario", ["parent-dies-in-body", "parent-dies-in-next"])
def test_workers_exit_when_the_main_process_is_killed(no_leaks, start_method, scenario, tmp_path):
    shm_before = shm_entries()
    proc = start_script(scenario, start_method, str(tmp_path))
    try:
        lines = Lines(proc)
        if scenario == "parent-dies-in-body":
            pids = lines.next()["pids"]
        else:  # the main process's line and, in any order, one from each worker hung in the dataset
            got = [lines.next() for _ in range(3)]
            pids = next(line["pids"] for line in got if "pids" in line)
            stuck = {line["stuck"] for line in got if "stuck" in line}
            assert len(stuck) == 2 and stuck <= set(pids), got
        assert len(pids) >= 2, f"expected two workers among the script's descendants: {pids}"

        os.kill(proc.pid, signal.SIGKILL)
        killed_at = time.monotonic()
        proc.wait(timeout=5)
        left = wait_gone(pids, NOTICE_WITHIN - (time.monotonic() - killed_at))
    finally:
        proc.kill()
        proc.communicate(timeout=5)

    assert not left, f"still running {NOTICE_WITHIN} s after the main process was killed: {left}"
    assert shm_entries() - shm_before == set()
    # Only multiprocessing's own directory for the forkserver's socket may remain in TMPDIR.
    assert [p.name for p in tmp_path.iterdir() if not p.name.startswith("pymp-")] == []


# -- a worker hangs ----------------------------------------------------------------


def test_timeout_names_the_stuck_worker_its_indices_and_its_stack(no_leaks, start_method, tmp_path):
    report_path = str(tmp_path / "stuck.json")
    timeout = 1.0
    # Sample 5 hangs (in batch 1); the other worker finishes everything it is given.
    loader = loader_over(StuckAt(64, FAULT_INDEX, report_path), start_method, timeout=timeout)
    iterator = iter(loader)
    assert next(iterator)[:, 0].tolist() == [0, 1, 2, 3]

    started = time.monotonic()
    with pytest.raises(dataloader.LoaderTimeoutError) as info:
        next(iterator)
    elapsed = time.monotonic() - started

    error = info.value
    assert isinstance(error, TimeoutError) and isinstance(error, RuntimeError)
    assert timeout <= elapsed < timeout + NOTICE_WITHIN
    report = read_report(report_path)
    message = str(error)
    assert "timeout" in message
    assert f"worker {report['worker_id']} (pid {report['pid']})" in message
    assert str(batch_of(FAULT_INDEX)) in message
    assert "stuck_inside_dataset_forever" in message  # the hung worker's own stack
    assert "__getitem__" in message


def test_timeout_bounds_each_batch_not_the_epoch(no_leaks):
    # 24 batches of 0.2 s on 2 workers take 2.4 s in all, each well inside the 1 s timeout.
    loader = loader_over(Numbers(96, delay=0.05), "fork", timeout=1.0)
    started = time.monotonic()
    assert [int(b[0, 0]) for b in loader] == list(range(0, 96, 4))
    assert time.monotonic() - started > 1.0
