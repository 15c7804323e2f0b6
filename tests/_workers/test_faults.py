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
    FailsToUnpickle,
    Numbers,
    StuckAt,
    UnpicklableTransform,
    batch_of,
    loader_over,
    read_report,
)
from tests._workers._scripts import Lines, shm_entries, start_script, wait_gone
from tests.harness import notice_within, shm_left_behind

# The 1 s bound the robustness guarantee promises, plus a margin for a 2-core CI machine.

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
        ("SIGKILL", "(pid {pid}) is killed by signal: Killed (SIGKILL); it was worker {worker_id}."),
        ("SIGSEGV", "(pid {pid}) is killed by signal: Segmentation fault (SIGSEGV); it was worker {worker_id}."),
        ("exit3", "(pid(s) {pid}) exited unexpectedly with exit code 3; it was worker {worker_id}."),
    ],
)
def test_worker_death_is_reported_at_once(no_leaks, start_method, tmp_path, how, expected):
    report_path = str(tmp_path / "fault.json")
    loader = loader_over(DieAt(64, FAULT_INDEX, how, report_path), start_method)

    error, raised_at = _iterate_until_error(loader)

    report = read_report(report_path)
    assert raised_at - report["time"] < notice_within()
    assert isinstance(error, RuntimeError)
    message = str(error)
    assert message.startswith("DataLoader worker " + expected.format(**report)), message


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

    no_leaks.check(grace=notice_within())  # the surviving worker is stopped, not orphaned
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
        left = wait_gone(pids, notice_within() - (time.monotonic() - killed_at))
    finally:
        proc.kill()
        proc.communicate(timeout=5)

    assert not left, f"still running {notice_within()} s after the main process was killed: {left}"
    assert shm_left_behind(shm_before) == set()
    # Only multiprocessing's own directory for the forkserver's socket may remain in TMPDIR.
    assert [p.name for p in tmp_path.iterdir() if not p.name.startswith("pymp-")] == []


# -- a worker fails to start ---------------------------------------------------------
# Reported like any worker error (the original type and message, the worker id and pid), not
# as a worker that "exited with code 1" with the real traceback only on its stderr.


def _first_error(loader, expected):
    started = time.monotonic()
    with pytest.raises(expected) as info:
        for _ in loader:
            pass
    return info.value, time.monotonic() - started


@pytest.mark.parametrize("method", ["spawn", "forkserver"])  # fork hands the objects over unpickled
def test_a_dataset_that_fails_to_unpickle_in_a_worker_is_reported_whole(no_leaks, method):
    error, elapsed = _first_error(loader_over(FailsToUnpickle(64), method), FileNotFoundError)

    assert isinstance(error, dataloader.WorkerError) and error.indices is None
    message = str(error)
    found = re.match(r"Caught FileNotFoundError in DataLoader worker process (\d) \(pid (\d+)\) \(stage: unpickling\)\.", message)
    assert found, message
    assert error.worker_id == int(found[1]) and error.pid == int(found[2])
    assert f"cannot reopen /data/index.db in pid {found[2]}" in message  # the worker's own words
    assert "__setstate__" in message  # and its traceback
    assert "os._exit" not in message
    assert elapsed < 30


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_a_transform_that_fails_to_unpickle_in_a_worker_is_reported_whole(no_leaks, method):
    loader = loader_over(Numbers(64), method, transform=UnpicklableTransform())
    error, _ = _first_error(loader, ValueError)

    assert isinstance(error, dataloader.WorkerError)
    assert "(stage: unpickling)" in str(error)
    assert "model weights are not on the worker's machine" in str(error)


def test_a_failure_in_worker_start_up_is_reported_whole(no_leaks, monkeypatch):
    """Anything that fails while a worker starts, before worker_init_fn, goes home too (the
    patch reaches forked workers only; the unpickling tests cover the other start methods)."""

    def no_entropy(seed):
        raise RuntimeError(f"cannot seed worker in pid {os.getpid()}")

    monkeypatch.setattr("dataloader._workers.loop.seed_all", no_entropy)
    error, _ = _first_error(loader_over(Numbers(64), "fork"), RuntimeError)

    assert isinstance(error, dataloader.WorkerError)
    message = str(error)
    assert re.match(r"Caught RuntimeError in DataLoader worker process \d \(pid \d+\) \(stage: start-up\)\.", message)
    assert f"cannot seed worker in pid {error.pid}" in message


# -- a worker hangs ----------------------------------------------------------------


def test_timeout_names_the_stuck_worker_its_indices_and_its_stack(no_leaks, start_method, tmp_path):
    report_path = str(tmp_path / "stuck.json")
    # Sample 5 hangs (in batch 1); the other worker finishes everything it is given. `timeout`
    # also bounds the first batch, which waits for the workers to start: on a busy machine a
    # spawn worker can take longer than 1 s, so the timeout grows until the first batch fits.
    timeout, iterator = _first_batch_within(
        lambda timeout: loader_over(StuckAt(64, FAULT_INDEX, report_path), start_method, timeout=timeout)
    )

    started = time.monotonic()
    with pytest.raises(dataloader.LoaderTimeoutError) as info:
        next(iterator)
    elapsed = time.monotonic() - started

    error = info.value
    assert isinstance(error, TimeoutError) and isinstance(error, RuntimeError)
    assert timeout <= elapsed < timeout + notice_within()
    report = read_report(report_path)
    message = str(error)
    assert message.startswith(
        f"DataLoader timed out after {timeout:g} seconds: no batch arrived (timeout={timeout:g}). Raise `timeout`"
    )
    assert f"worker {report['worker_id']} (pid {report['pid']})" in message
    assert str(batch_of(FAULT_INDEX)) in message
    assert "stuck_inside_dataset_forever" in message  # the hung worker's own stack
    assert "__getitem__" in message


def _first_batch_within(make_loader):
    """The smallest timeout of 1, 4, 16 s within which the first batch arrives, and the iterator.

    (The other worker may be stuck on batch 1 already: that is no reason for batch 0 to be late.)
    """
    for timeout in (1.0, 4.0, 16.0):
        iterator = iter(make_loader(timeout))
        try:
            assert next(iterator)[:, 0].tolist() == [0, 1, 2, 3]
            return timeout, iterator
        except dataloader.LoaderTimeoutError:
            iterator.close()
    pytest.fail("the workers did not deliver their first batch within 16 s")


def test_timeout_bounds_each_batch_not_the_epoch(no_leaks):
    # 24 batches of 0.2 s on 2 workers take 2.4 s in all, each well inside the 1 s timeout.
    loader = loader_over(Numbers(96, delay=0.05), "fork", timeout=1.0)
    started = time.monotonic()
    assert [int(b[0, 0]) for b in loader] == list(range(0, 96, 4))
    assert time.monotonic() - started > 1.0
