"""Finding the sample that kills its worker (a decoder that segfaults or aborts on a corrupt file).

After a worker died making a batch, the batch is made again in a fresh process, one sample at
a time, by the same :class:`~dataloader._stages.batch.BatchMaker` a worker runs (substitutes of
``on_error="replace"`` included), with a hook that tells the main process which sample it is
about to fetch or transform. A probe that dies names its culprit: the last sample it announced.
The culprit joins the task's ``bad`` samples, which are never read again, and the next probe
goes on until one finishes the batch. The worker that replaces the dead one then makes the
batch with those samples failed, as if they had raised, so the batch is what it would be had
the sample raised instead, for any number of workers.
"""

from __future__ import annotations

import faulthandler
import os
import signal
from dataclasses import replace
from typing import Any

from .._failure_book import SUBSTITUTE_DRAWS
from .._local import mark_worker_process, set_worker_info
from .._stages.batch import BatchMaker
from .._stages.seeding import seed_all
from .._stages.task import BatchTask
from ..hooks import StageEvent, StageHook
from ..worker import WorkerInfo
from .exits import end_process
from .handle import EXIT_GRACE
from .loop import PickledBoot, WorkerBoot, exit_when_parent_dies


class _Announce(StageHook):
    """Sends (stage, key) before each sample is fetched or transformed on its own."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def before(self, event: StageEvent) -> None:
        if event.level == "sample":
            self._conn.send((event.stage, event.indices[0]))


def run_probe(boot: WorkerBoot | PickledBoot, task: BatchTask, conn: Any, parent_alive: Any, close_fds: tuple[int, ...]) -> None:
    """Entry point of a probe process: make ``task`` one sample at a time, announcing each."""
    mark_worker_process()
    faulthandler.disable()  # the crash is what the probe is for: no fatal-error dump
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for fd in close_fds:
        try:
            os.close(fd)
        except OSError:
            pass
    exit_when_parent_dies(parent_alive.fileno())
    if isinstance(boot, PickledBoot):
        boot = boot.load()
    seed = (boot.seed + boot.worker_id) % 2**64
    set_worker_info(WorkerInfo(boot.worker_id, boot.num_workers, seed, boot.dataset))
    seed_all(seed)
    if boot.worker_init_fn is not None:
        boot.worker_init_fn(boot.worker_id)
    maker = BatchMaker(
        boot.dataset, boot.transform, boot.collator, boot.seed,
        policy=boot.policy, hooks=(_Announce(conn),), one_by_one=True,
    )
    try:
        maker(task)
    except BaseException:  # a sample that raises is no killer: the policy's, or the user's (SystemExit)
        pass
    conn.send(None)  # finished: nothing in this batch kills a process now


def find_killers(context: Any, boot: WorkerBoot, task: BatchTask, worker: str, timeout: float | None) -> BatchTask | None:
    """``task`` with every sample that kills the process reading it in ``bad``, or None when a
    probe finds no culprit (the worker died of something else: the OOM killer, a stray signal)."""
    found = False
    # Each sample, and each of its substitutes under "replace", can be a culprit at most once.
    samples = len(task.indices if task.indices is not None else task.jobs or task.samples or ())
    limit = 1 + (1 + SUBSTITUTE_DRAWS) * samples
    for _ in range(limit):
        culprit = _probe(context, boot, task, timeout)
        if culprit is None:
            return task if found else None
        (stage, key), how = culprit
        text = (
            f"reading this sample killed {worker}; then it killed a fresh process ({how}) when "
            f"{stage} ran on it alone. Found by making the batch again one sample at a time."
        )
        task = replace(task, bad=task.bad + ((key, stage, text, how),))
        found = True
    return None


def _probe(context: Any, boot: WorkerBoot, task: BatchTask, timeout: float | None) -> tuple[tuple[str, Any], str] | None:
    """Run one probe: the last sample it announced and how it died, or None if it finished."""
    reader, writer = context.Pipe(duplex=False)
    alive_in, alive_out = context.Pipe(duplex=False)
    fork = context.get_start_method() == "fork"
    sent = boot if fork else PickledBoot(boot, context.get_start_method())
    close_fds = (alive_out.fileno(), reader.fileno()) if fork else ()
    process = context.Process(
        target=run_probe, args=(sent, task, writer, alive_in, close_fds), name="dataloader-probe", daemon=True
    )
    process.start()
    writer.close()
    alive_in.close()
    last, finished, hung_up, exitcode, killed = None, False, False, None, False
    try:
        while True:
            if timeout is not None and not reader.poll(timeout):
                break  # stuck rather than dead: not a culprit this can name
            try:
                message = reader.recv()
            except EOFError:  # it is gone or going, whatever its process says yet
                hung_up = True
                break
            if message is None:
                finished = True
                break
            last = message
        # Hung up (or finished): killed unless it exits within EXIT_GRACE, for a probe stuck
        # dying, or one whose sample closed its descriptors, is dead all the same. Stuck: it
        # gets ``timeout`` more (only a death then names a culprit).
        exitcode, killed = end_process(process, EXIT_GRACE if finished or hung_up else timeout)
    finally:
        reader.close()
        alive_out.close()
        end_process(process, 0.0)  # if an error cut the wait above short: killed, waited for within a bound
        if process.exitcode is not None:
            process.close()  # else asleep in the kernel even after SIGKILL: multiprocessing reaps it later
    if finished or last is None:
        return None
    if killed:  # by end_process: a culprit only if it had hung up first
        return (last, "hung up without exiting") if hung_up else None
    return (last, _how(exitcode)) if exitcode else None


def _how(exitcode: int) -> str:
    """A process's end in words: the signal's name, or the exit code."""
    if exitcode < 0:
        try:
            return signal.Signals(-exitcode).name
        except ValueError:
            return f"signal {-exitcode}"
    return f"exit code {exitcode}"
