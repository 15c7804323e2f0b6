"""However an epoch ends, its workers, threads, descriptors and shared memory go with it.

The ``no_leaks`` fixture checks this process; the child-script tests check
the processes a script leaves behind when it is interrupted or just exits.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import signal
import subprocess
import time

import pytest

import dataloader
from tests._workers._fixtures import (
    CountsReads,
    HoldsLambdaCollator,
    HoldsLambdaDataset,
    HoldsLambdaTransform,
    Numbers,
    loader_over,
)
from tests._workers._scripts import Lines, descendants_of, shm_entries, start_script, wait_gone
from tests.harness import notice_within, shm_left_behind



# -- close() and the context manager ---------------------------------------------------


def test_close_mid_epoch_stops_everything(no_leaks, start_method):
    iterator = iter(loader_over(Numbers(400), start_method))
    assert next(iterator)[:, 0].tolist() == [0, 1, 2, 3]

    iterator.close()

    no_leaks.check(grace=notice_within())
    with pytest.raises(StopIteration):
        next(iterator)


def test_closing_twice_is_harmless(no_leaks):
    iterator = iter(loader_over(Numbers(400), "fork"))
    next(iterator)
    iterator.close()
    iterator.close()
    with iterator:
        pass
    no_leaks.check(grace=notice_within())


def test_leaving_a_with_block_early_stops_everything(no_leaks, start_method):
    with iter(loader_over(Numbers(400), start_method)) as iterator:
        for i, _ in enumerate(iterator):
            if i == 2:
                break
    no_leaks.check(grace=notice_within())


def test_break_then_del_and_gc_stops_everything(no_leaks, start_method):
    iterator = iter(loader_over(Numbers(400), start_method))
    for i, _ in enumerate(iterator):
        if i == 2:
            break
    del iterator, _
    gc.collect()
    no_leaks.check(grace=notice_within())


def _train_and_fail(loader) -> None:
    for step, batch in enumerate(loader):
        if step == 3:
            raise FloatingPointError(f"loss is nan at step {step}")


def test_an_exception_in_the_training_loop_body_stops_everything(no_leaks, start_method):
    with pytest.raises(FloatingPointError):
        _train_and_fail(loader_over(Numbers(400), start_method))
    gc.collect()
    no_leaks.check(grace=notice_within())


def test_an_exhausted_epoch_has_stopped_its_workers_before_the_loop_ends(no_leaks):
    loader = loader_over(Numbers(16), "fork")
    for _ in loader:
        pass
    no_leaks.check(grace=0.0)  # nothing to wait for: StopIteration closed the epoch


def test_persistent_workers_stop_on_loader_close(no_leaks):
    loader = loader_over(Numbers(16), "fork", persistent_workers=True)
    first = [int(b[0, 0]) for b in loader]
    second = [int(b[0, 0]) for b in loader]
    assert first == second == [0, 4, 8, 12]
    loader.close()
    loader.close()
    no_leaks.check(grace=notice_within())


def test_a_pool_whose_pipes_were_finalized_first_still_stops_every_worker(no_leaks):
    """A loader dropped in a reference cycle is shut down by the garbage collector, which may run
    the finalizer of a pipe the pool holds (it closes the descriptor and leaves the object
    looking open) before the pool's shutdown: closing it again fails, and used to end the
    shutdown there, with the workers still running."""
    loader = loader_over(Numbers(16), "fork", persistent_workers=True)
    assert [int(b[0, 0]) for b in loader] == [0, 4, 8, 12]
    pool = loader._pipeline._pool
    pool._alive_out.__del__()  # what the collector may do first, whatever the order
    pool.workers[0].stack_in.__del__()
    loader.close()
    no_leaks.check(grace=notice_within())


# -- spawn/forkserver: what does not pickle is named up front --------------------------

UNPICKLABLE = [
    ("dataset", dict(dataset=HoldsLambdaDataset())),
    ("transform", dict(transform=HoldsLambdaTransform())),
    ("collator", dict(collator=HoldsLambdaCollator())),
    ("worker_init_fn", dict(worker_init_fn=lambda worker_id: None)),
]


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
@pytest.mark.parametrize("name, parts", UNPICKLABLE, ids=[u[0] for u in UNPICKLABLE])
def test_an_unpicklable_part_is_named_before_any_worker_starts(no_leaks, method, name, parts):
    parts = dict(parts)
    dataset = parts.pop("dataset", Numbers(8))
    loader = loader_over(dataset, method, **parts)

    with pytest.raises(dataloader.ArgumentTypeError) as info:
        iter(loader)

    message = str(info.value)
    assert f"`{name}`" in message, message
    assert method in message
    for other in ("dataset", "transform", "collator", "worker_init_fn"):
        if other != name:
            assert f"`{other}`" not in message


@pytest.fixture(scope="module")
def shared_heap():
    """multiprocessing's shared heap, made before a test's leak check: its arena's descriptors
    are multiprocessing's, kept for the life of the process, not the loader's."""
    return multiprocessing.Value("i", 0)


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_what_multiprocessing_lets_a_child_inherit_reaches_the_workers(shared_heap, no_leaks, method):
    """A Value and a Semaphore in the dataset travel as multiprocessing sends them to a child it
    spawns (PyTorch's workers get them so); the workers count into the parent's Value."""
    dataset = CountsReads(8, method)
    assert [b.tolist() for b in loader_over(dataset, method)] == [[[i] for i in range(4)], [[i] for i in range(4, 8)]]
    assert dataset.reads.value == 8


def test_fork_needs_no_pickling(no_leaks):
    loader = loader_over(HoldsLambdaDataset(), "fork", worker_init_fn=lambda worker_id: None)
    assert [int(b[0, 0]) for b in loader] == [0, 4]


# -- Ctrl-C and interpreter exit (child scripts) ----------------------------------------


def _interrupt(scenario: str, method: str, lines: int) -> tuple[subprocess.Popen, str, float, list[int], set]:
    """Start the script, Ctrl-C its process group after ``lines`` lines of stdout.

    Returns the process, its stderr, how long it took to exit, the descendants
    still running shortly after, and the new /dev/shm entries.
    """
    shm_before = shm_entries()
    proc = start_script(scenario, method)
    try:
        stdout = Lines(proc)
        for _ in range(lines):
            stdout.next()
        pids = descendants_of(proc.pid)
        assert len(pids) >= 2, pids
        masks = f"script {_signal_masks(proc.pid)}; pytest {_signal_masks(os.getpid())}"
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal does: the whole foreground process group
        sent_at = time.monotonic()
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the script ignored Ctrl-C for 60 s; signal masks: {masks}") from None
        exited_after = time.monotonic() - sent_at
        left = wait_gone(pids, max(0.0, notice_within() - (time.monotonic() - sent_at)))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc, err.decode(errors="replace"), exited_after, left, shm_left_behind(shm_before)


def _signal_masks(pid: int) -> str:
    """The blocked, ignored and caught signals of ``pid``, as the kernel has them (to tell why
    a process did not obey Ctrl-C)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            return " ".join(line.strip() for line in status if line.startswith(("SigBlk", "SigIgn", "SigCgt")))
    except OSError:
        return "unreadable"


def _assert_interrupted_cleanly(proc, stderr, exited_after, left, new_shm) -> None:
    assert exited_after < notice_within(), stderr
    assert proc.returncode == -signal.SIGINT, (proc.returncode, stderr)
    assert stderr.count("Traceback (most recent call last)") == 1, stderr  # the main process's only
    assert stderr.rstrip().endswith("KeyboardInterrupt"), stderr
    assert not left, f"still running after Ctrl-C: {left}"
    assert new_shm == set()


def test_ctrl_c_stops_the_script_with_one_traceback(no_leaks, start_method):
    _assert_interrupted_cleanly(*_interrupt("ctrl-c", start_method, lines=1))


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_ctrl_c_while_workers_start_stops_the_script_with_one_traceback(no_leaks, method):
    # Both workers are still unpickling the dataset when the terminal's SIGINT reaches them.
    _assert_interrupted_cleanly(*_interrupt("ctrl-c-while-workers-start", method, lines=2))


def test_interpreter_exit_with_a_live_iterator_leaves_nothing(no_leaks, start_method):
    shm_before = shm_entries()
    proc = start_script("exit-with-live-iterator", start_method)
    try:
        pids = Lines(proc).next()["pids"]
        assert len(pids) >= 2, pids
        announced_at = time.monotonic()
        _, err = proc.communicate(timeout=60)
        exited_after = time.monotonic() - announced_at
        left = wait_gone(pids, notice_within())
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()

    stderr = err.decode(errors="replace")
    assert proc.returncode == 0, stderr
    assert stderr == ""  # no "Exception ignored in ..." noise at exit
    assert exited_after < 2 * notice_within()
    assert not left, f"still running after the script exited: {left}"
    assert shm_left_behind(shm_before) == set()


# -- many short epochs -----------------------------------------------------------------

CYCLES = 150  # a descriptor, thread or segment kept per cycle shows after the first


@pytest.mark.timeout(600)
def test_open_iterate_close_cycles_leave_nothing(no_leaks, record_property):
    loader = loader_over(Numbers(64), "fork", num_workers=1)
    fds_after_first = None
    started = time.monotonic()
    for cycle in range(CYCLES):
        with iter(loader) as iterator:
            assert next(iterator)[:, 0].tolist() == [0, 1, 2, 3]
            assert next(iterator)[:, 0].tolist() == [4, 5, 6, 7]
        if cycle == 0:
            fds_after_first = len(os.listdir("/proc/self/fd"))
    elapsed = time.monotonic() - started
    record_property(f"seconds_for_{CYCLES}_cycles", round(elapsed, 1))
    print(f"\n{CYCLES} open/iterate/close cycles took {elapsed:.1f} s")

    assert len(os.listdir("/proc/self/fd")) <= fds_after_first
    no_leaks.check(grace=notice_within())
