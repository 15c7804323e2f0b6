"""A process forked by user code (``os.fork()``) mid-epoch leaves the parent's loader alone.

Before: a child that exited normally ran multiprocessing's exit handler, which
sent the parent's workers SIGTERM (the parent then saw ``WorkerDiedError``); a
child that called ``next()`` took the parent's batch; and a live child kept the
"parent alive" pipe open, so the workers outlived a killed parent by as long as
the child lived.
"""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

import dataloader
from tests._workers._fixtures import Numbers, loader_over
from tests._workers._fork_scripts import EXPECTED, SAMPLES, report, start
from tests._workers._scripts import Lines, wait_gone
from tests.harness import notice_within



@pytest.mark.parametrize("scenario", ["child-exits", "child-closes"])
def test_a_child_that_exits_leaves_the_parents_epoch_intact(no_leaks, start_method, scenario):
    # child-exits: the child exits normally with the iterator alive (atexit, then collection);
    # child-closes: it closes the iterator and the (persistent-worker) loader first.
    seen, stderr = report(start(scenario, start_method))
    assert seen.get("error") is None, seen["error"]
    assert seen["child_exit"] == 0, stderr
    assert seen["intact"] and seen["again"], seen
    assert "Traceback" not in stderr, stderr  # e.g. multiprocessing's "can only join a child ..."


def test_a_child_that_exits_leaves_the_parents_thread_workers_alone(no_leaks):
    # Each thread worker's channel is a pipe the child shares: its Shutdown at exit used to
    # reach the parent's thread, which found no message behind the byte and died.
    seen, stderr = report(start("child-exits-threads", "fork"))
    assert seen.get("error") is None, seen["error"]
    assert seen["child_exit"] == 0 and seen["intact"] and seen["again"], seen
    assert "Traceback" not in stderr, stderr


def _next_in_a_child(loader, can_start_workers: bool = True) -> None:
    """Fork mid-epoch; the child calls ``next()`` (and, if it can, runs a new epoch); then the
    parent finishes its epoch."""
    iterator = iter(loader)
    got = [int(next(iterator)[0, 0]) for _ in range(3)]
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report through the pipe, and never return into pytest
        try:
            os.close(read_end)
            try:
                next(iterator)
                seen = {"error": None}
            except Exception as error:  # noqa: BLE001 - reported to the parent
                seen = {
                    "error": type(error).__name__,
                    "message": str(error),
                    "is_loader_error": isinstance(error, dataloader.DataLoaderError),
                }
            if can_start_workers:  # what the message advises works: workers of the child's own
                seen["new_epoch"] = [int(b[0, 0]) for b in loader] == EXPECTED
            os.write(write_end, json.dumps(seen).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        seen = json.loads(pipe.read() or b"{}")
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0

    assert seen.get("is_loader_error"), seen
    expected = f"belongs to process {os.getpid()}; a forked child (process {pid}) cannot use it"
    assert expected in seen["message"], seen
    assert seen.get("new_epoch", not can_start_workers), seen
    got += [int(batch[0, 0]) for batch in iterator]
    assert got == EXPECTED, "the parent lost a batch to the child"


def test_next_in_a_child_is_a_clear_error_and_the_parent_keeps_every_batch(no_leaks, start_method):
    # Under forkserver the child cannot start workers: multiprocessing's fork server serves
    # only the process that started it.
    _next_in_a_child(loader_over(Numbers(SAMPLES), start_method), start_method != "forkserver")


def test_next_in_a_child_with_thread_workers_is_a_clear_error_too(no_leaks):
    # Before, the child read the parent's thread channels (pipes it shares): the parent's
    # threads then found bytes without messages and died.
    _next_in_a_child(loader_over(Numbers(SAMPLES), "fork", worker_type="thread"))


def test_workers_exit_when_the_parent_is_killed_while_a_forked_child_lives(
    no_leaks, start_method, tmp_path
):
    proc = start("parent-killed", start_method, str(tmp_path))
    child = None
    try:
        seen = Lines(proc).next()
        workers, child = seen["workers"], seen["child"]
        assert len(workers) == 2, seen
        os.kill(proc.pid, signal.SIGKILL)
        killed_at = time.monotonic()
        proc.wait(timeout=5)
        left = wait_gone(workers, notice_within(2.0) - (time.monotonic() - killed_at))
    finally:
        if child is not None:
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:
                pass
            wait_gone([child], 5.0)
        proc.kill()
        proc.communicate(timeout=5)
    assert not left, f"workers still running {notice_within(2.0)} s after the parent was killed: {left}"
