"""Starting, watching and stopping worker processes.

The main process learns of a worker's death from its process sentinel, which
every wait includes, so a crash is noticed at once rather than on a poll.
Workers learn of the main process's death from a pipe whose only writer is
the main process: its end closes when the main process dies, however. A
process forked from the main process by user code lets go of the pool
(:mod:`~dataloader._workers.fork_safety`): it would otherwise keep that pipe
open, and could stop or rob the workers.
"""

from __future__ import annotations

import gc
import logging
import multiprocessing.process
import multiprocessing.resource_tracker
import os
import select
import signal
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection
from typing import Any, Iterator, NoReturn

from ..errors import WorkerDiedError
from ..memory import describe_oom, describe_shm
from .._transport.receiver import Receiver
from .descriptors import START_PEAK, descriptors_for, ensure_free
from .exits import end_process, ready_within, wait_for_exit
from .fd_passing import receive_descriptor
from .fork_safety import watch
from .handle import EXIT_GRACE, STOP_GRACE, Handle
from .loop import PickledBoot, WorkerBoot, run_worker
from .main_guard import forkserver_died_message, refuse_workers_while_starting, unguarded_main_message
from .messages import SegmentCreated, SegmentRetired, Shutdown
from .native_threads import import_before_fork
from .wire import Wire

logger = logging.getLogger("dataloader")


@dataclass(eq=False)
class WorkerHandle(Handle):
    """The main process's view of one worker process."""

    process: Any
    stack_in: Connection
    # How it exited, kept when the pool closes its Process (whose exitcode then raises).
    exitcode: int | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        self._pid: int = self.process.pid  # kept: a closed Process no longer tells it

    @property
    def pid(self) -> int:
        return self._pid

    @property
    def sentinel(self) -> int:
        return self.process.sentinel

    @property
    def label(self) -> str:
        return f"worker {self.id} (pid {self.pid})"


class WorkerPool:
    """``num_workers`` processes running :func:`run_worker`, and the receiver of their segments."""

    def __init__(self, boots: list[WorkerBoot], context: Any) -> None:
        method = context.get_start_method()
        refuse_workers_while_starting()
        self.receiver = Receiver()
        self.workers: list[WorkerHandle] = []
        self._context = context
        try:
            self._alive_in, self._alive_out = context.Pipe(duplex=False)
        except BaseException:
            self.receiver.close()
            raise
        self._boots = {boot.worker_id: boot for boot in boots}  # to start a worker's replacement
        # The "parent alive" pipes of workers started later (replacements, a larger pool), by id.
        self._spare_alive: dict[int, Connection] = {}
        self.retired: set[int] = set()  # ids of workers that get no more work: dead and replaced, or stopped
        self.stopped: set[int] = set()  # of those, the ones asked to exit (a smaller pool)
        self._reaped: set[int] = set()  # stopped, exited, and their descriptors closed
        self._stopping = False
        self.broken = False  # a worker died: a persistent loader must not reuse this pool
        # What raise_died said of each dead worker, by id, and whether it died while starting.
        self._deaths: dict[int, tuple[str, bool]] = {}
        self._pid = os.getpid()
        self.detached = False  # this process is a fork of the pool's: touch nothing shared
        watch(self)  # before the first fork: a forked worker lets go of the pool too
        if method == "fork":
            import_before_fork()
        try:
            with _heap_frozen() if method == "fork" else nullcontext():
                for boot in boots:
                    self.workers.append(self._start(boot))
        except BaseException:
            self.shutdown()
            raise
        self._alive_in.close()

    def replace_worker(self, worker: WorkerHandle) -> WorkerHandle:
        """Start a worker in place of ``worker``, which died: it gets the next free id (its dead
        predecessor's segments may still be lent out under the old one) and the same boot."""
        old = self._boots[worker.id]
        handle = self._start_another(old, f"{old.name}-r{len(self.workers)}")
        self.retired.add(worker.id)
        self.receiver.remove_worker(worker.id)  # batches still lent out keep their mappings
        return handle

    def add_worker(self) -> WorkerHandle:
        """Start one more worker (the autotuner grows the pool): the next free id, the first
        worker's boot."""
        first = self._boots[self.workers[0].id]
        return self._start_another(first, f"{first.name}-a{len(self.workers)}")

    def stop_worker(self, worker: WorkerHandle) -> None:
        """Ask ``worker``, which has nothing outstanding, to exit (the autotuner shrinks the
        pool). It is retired at once: no task or release goes to it any more, and the segments
        it lent out stay mapped until the user drops them. :meth:`reap` follows its exit."""
        self.retired.add(worker.id)
        self.stopped.add(worker.id)
        worker.waiting = None
        try:
            worker.conn.send(Shutdown())
            _flush_within(worker.conn, STOP_GRACE)
        except OSError:
            pass  # it is gone already: its sentinel says so
        self.receiver.remove_worker(worker.id)

    def reap(self, worker: WorkerHandle) -> None:
        """Release what the pool holds of a stopped worker that has exited (or kill it, if it
        has not within the grace period)."""
        if worker.id in self._reaped:
            return
        self._reaped.add(worker.id)
        _end_process(worker, STOP_GRACE)
        alive = self._spare_alive.pop(worker.id, None)
        if alive is not None:
            _close_quietly(alive)

    def _start_another(self, template: WorkerBoot, name: str) -> WorkerHandle:
        """Start a worker with the next free id from ``template``, the pool's other workers running."""
        new_id = len(self.workers)
        method = self._context.get_start_method()
        with descriptors_for(1, method):
            ensure_free(START_PEAK[method] + 2)  # its own "parent alive" pipe too
            alive_in, alive_out = self._context.Pipe(duplex=False)
        self._spare_alive[new_id] = alive_out
        fork = method == "fork"
        # Under fork the child inherits every "parent alive" write end: it must close them, or
        # no worker would see the main process die.
        inherited = tuple(c.fileno() for c in (self._alive_out, *self._spare_alive.values())) if fork else ()
        live = len(self.workers) - len(self.retired) + 1
        boot = replace(
            template, worker_id=new_id, num_workers=live, name=name, close_fds=template.close_fds + inherited
        )
        self._boots[new_id] = boot
        try:
            with _heap_frozen() if fork else nullcontext(), descriptors_for(1, method):
                handle = self._start(boot, alive_in)
        finally:
            alive_in.close()
        self.workers.append(handle)
        return handle

    def boot_of(self, worker: WorkerHandle) -> WorkerBoot:
        return self._boots[worker.id]

    @property
    def context(self) -> Any:
        return self._context

    def _start(self, boot: WorkerBoot, alive_in: Connection | None = None) -> WorkerHandle:
        """Start one worker process; whatever it opened is closed again if that fails."""
        ensure_free(START_PEAK[self._context.get_start_method()])
        main_end, worker_end = self._context.Pipe(duplex=True)
        try:
            stack_in, stack_out = self._context.Pipe(duplex=False)
        except BaseException:
            _close_quietly(main_end, worker_end)
            raise
        try:
            process = self._launch(boot, worker_end, alive_in or self._alive_in, stack_out)
        except BaseException:
            _close_quietly(main_end, stack_in)
            raise
        finally:
            _close_quietly(worker_end, stack_out)
        os.set_blocking(stack_in.fileno(), False)
        return WorkerHandle(boot.worker_id, Wire(main_end, never_block=True), process, stack_in)

    def _launch(self, boot: WorkerBoot, worker_end: Connection, alive_in: Connection, stack_out: Connection) -> Any:
        """The started process of ``boot``, handed the worker's ends of its pipes."""
        # Pickled as the process starts, unpickled by the worker where a failure can be reported.
        method = self._context.get_start_method()
        sent = boot if method == "fork" else PickledBoot(boot, method)
        process = self._context.Process(
            target=run_worker,
            args=(sent, worker_end, alive_in, stack_out),
            name=f"dataloader-worker-{boot.worker_id}",
            daemon=True,
        )
        if self._context.get_start_method() != "fork":
            # Started first: its ensure_running() unblocks SIGINT on its way out.
            multiprocessing.resource_tracker.ensure_running()
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            process.start()
        except (ConnectionError, EOFError) as error:
            if self._context.get_start_method() != "forkserver":
                raise
            died = WorkerDiedError(forkserver_died_message(f"worker {boot.worker_id}", error))
            died.worker_id, died.indices = boot.worker_id, []
            raise died from error
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        return process

    def send(self, worker: WorkerHandle, message: Any) -> None:
        try:
            worker.conn.send(message)
        except OSError as error:  # a broken pipe, a reset: its end is closed
            self.raise_died(worker, error)

    def receive(self, worker: WorkerHandle) -> Any:
        """The worker's next message; segment bookkeeping is handled here and returns None.
        Its channel closed: :class:`WorkerDiedError` (the EOF itself from a stopped worker)."""
        try:
            message = worker.conn.recv()
            fd = receive_descriptor(worker.conn, worker.label) if isinstance(message, SegmentCreated) else -1
        except (EOFError, OSError) as error:
            if worker.id in self.stopped:
                raise  # asked to exit: its end closing is its last word, not a death
            self.raise_died(worker, error)
        if isinstance(message, SegmentCreated):
            self.receiver.add_segment(worker.id, message.segment_id, fd, message.size)
            return None
        if isinstance(message, SegmentRetired):
            self.receiver.remove_segment(worker.id, message.segment_id)
            return None
        return message

    def raise_died(self, worker: WorkerHandle, cause: BaseException | None = None) -> NoReturn:
        """Raise :class:`WorkerDiedError` for ``worker``, whose channel broke (``cause``: the
        ``EOFError`` or ``OSError`` met on it) or whose exit sentinel fired: it is gone or going,
        whatever its process says yet. It gets ``EXIT_GRACE`` seconds to exit (a bounded wait on
        its exit, no polling), is killed if it is still there, and is reaped; the error names
        its exit code or signal, or says that it was killed here, and why that happens."""
        if worker.id not in self._deaths:  # else met again (draining its last words, say)
            self.broken = True
            self._deaths[worker.id] = self._death_text(worker, cause)
        text, starting = self._deaths[worker.id]
        error = WorkerDiedError(text)
        error.worker_id, error.pid = worker.id, worker.pid
        if starting:
            error.indices = []  # it died before any sample: naming its batches would mislead
        raise error from cause

    def _death_text(self, worker: WorkerHandle, cause: BaseException | None) -> tuple[str, bool]:
        """What ``worker``'s death says, once it is reaped (or killed, if it would not exit),
        and whether it died while starting (an unguarded main script)."""
        pid = worker.pid
        exitcode, killed = end_process(worker.process, EXIT_GRACE)
        if not killed:
            unguarded = unguarded_main_message(worker.label, self._context.get_start_method(), exitcode)
            return unguarded or death_message(worker.id, pid, exitcode), unguarded is not None
        broke = f"its connection to the main process closed ({_named(cause)})" if cause else "its exit pipe closed"
        return (
            f"DataLoader worker {worker.id} (pid {pid}) stopped answering: {broke}, but the process "
            f"had not exited {EXIT_GRACE:g} s later, so the main process killed it (SIGKILL). A "
            "dying worker stuck in an atexit handler, a signal handler or a C destructor does "
            "this, and so does code in the dataset, transform or collator that closes the "
            "process's file descriptors (os.closerange, a library that daemonizes): find what "
            "blocks or closes them (py-spy dump --pid on a stuck worker shows where)."
        ), False

    def stack(self, worker: WorkerHandle, wait: float = 1.0) -> str:
        """The worker's current Python stack (faulthandler), or '' if it cannot be had."""
        try:
            os.kill(worker.pid, signal.SIGUSR1)
        except OSError:
            return ""
        chunks = []
        deadline = time.monotonic() + wait
        fd = worker.stack_in.fileno()
        while True:
            remaining = deadline - time.monotonic()
            # After the first bytes, a short quiet spell means the dump is complete.
            if not ready_within(fd, select.POLLIN, min(remaining, 0.1) if chunks else remaining):
                break
            try:
                data = os.read(fd, 65536)
            except BlockingIOError:
                continue
            if not data:
                break
            chunks.append(data)
        return b"".join(chunks).decode("utf-8", "replace")

    def detach(self) -> None:
        """In a process forked from the pool's (see :mod:`fork_safety`): forget the workers
        without touching them, and close this process's copies of their descriptors and of
        the "parent alive" pipe's write end. Iterators then refuse to run here (the receiver
        says why), ``shutdown()`` does nothing, and a persistent loader starts new workers."""
        self._stopping = True
        self.broken = True
        self.detached = True
        children = getattr(multiprocessing.process, "_children", None)
        for worker in self.workers:
            if worker.id in self._reaped:
                continue
            if children is not None:
                children.discard(worker.process)  # else multiprocessing's exit handler kills it
            worker.conn.close()
            worker.stack_in.close()
            finalizer = getattr(getattr(worker.process, "_popen", None), "finalizer", None)
            if finalizer is not None:
                finalizer()  # this process's copies of the sentinel pipes
        self._alive_out.close()
        for spare in self._spare_alive.values():
            spare.close()
        self.receiver.detach(self._pid)

    def shutdown(self) -> None:
        """Stop every worker (asked, then killed after a grace period) and release everything."""
        if self._stopping:
            return
        self._stopping = True
        for worker in self.workers:
            if worker.id in self.stopped:
                continue  # told already
            try:
                worker.conn.send(Shutdown())
            except OSError:
                pass
        _close_quietly(self._alive_out, *self._spare_alive.values())  # every worker's watchdog sees EOF
        deadline = time.monotonic() + STOP_GRACE
        running = [worker for worker in self.workers if worker.id not in self._reaped]
        for worker in running:
            wait_for_exit(worker.process, deadline - time.monotonic())
        for worker in running:
            _end_process(worker)
        if not self._alive_in.closed:
            self._alive_in.close()
        self.receiver.close()


def _end_process(worker: WorkerHandle, grace: float = 0.0) -> None:
    """Kill ``worker`` if it still runs after ``grace`` seconds, reap it, and close the pool's
    descriptors of it."""
    end_process(worker.process, grace)
    _close_quietly(worker.conn, worker.stack_in)
    if worker.process.exitcode is not None:
        worker.exitcode = worker.process.exitcode
        worker.process.close()


def _close_quietly(*closables: Any) -> None:
    """Close each of ``closables``. A pool dropped with its loader in a reference cycle is shut
    down by the garbage collector, which may have run a pipe's own finalizer (closing its
    descriptor, and leaving it looking open) first: closing it again fails, and must not stop
    the shutdown before every worker is stopped."""
    for closable in closables:
        try:
            closable.close()
        except OSError:
            pass


def _flush_within(conn: Wire, seconds: float) -> None:
    """Write what waits in ``conn`` (a worker with nothing outstanding reads at once), for at
    most ``seconds``; what is left then is moot (the worker is killed when reaped)."""
    deadline = time.monotonic() + seconds
    while conn.unsent and not conn.flush():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return
        ready_within(conn.fileno(), select.POLLOUT, remaining)


def _named(error: BaseException) -> str:
    """``error`` as a message quotes it: "EOFError", "ConnectionResetError: [Errno 104] ..."."""
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def death_message(worker_id: int, pid: int, exitcode: int | None) -> str:
    """What happened to a worker that exited unasked, and the likely cause. It opens with
    PyTorch's words for the same event, which tests and searches look for."""
    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
            description = signal.strsignal(-exitcode) or name
        except ValueError:
            name = description = f"signal {-exitcode}"
        text = f"DataLoader worker (pid {pid}) is killed by signal: {description} ({name}); it was worker {worker_id}."
        cause = _SIGNAL_CAUSES.get(-exitcode, lambda: "")()
    else:
        text = f"DataLoader worker (pid(s) {pid}) exited unexpectedly with exit code {exitcode}; it was worker {worker_id}."
        cause = (
            "Something in the dataset, transform or collator called os._exit() or sys.exit(), "
            "or a native library aborted."
        )
    return f"{text} {cause}".rstrip()


_SIGNAL_CAUSES = {
    signal.SIGKILL: lambda: "The kernel's OOM killer is the usual cause. " + describe_oom(),
    signal.SIGBUS: lambda: (
        "A memory-mapped page could not be read: shared memory ran out, or a memory-mapped file "
        "(Arrow, or Parquet read in a worker) was truncated or rewritten while it was read. "
        + describe_shm()
    ),
    signal.SIGSEGV: lambda: "Native code crashed (a C extension used by the dataset or transform).",
    signal.SIGABRT: lambda: "Native code aborted (a C extension used by the dataset or transform).",
}


# Frozen objects that are not a program's freeze: Python 3.12 starts with a few hundred (375
# tuples here) and moves the immortal objects a full collection meets into the permanent
# generation again after every unfreeze. A program's gc.freeze() takes its whole heap (tens of
# thousands of objects at least), so only a count this far above them is the program's.
_NOT_A_PROGRAMS_FREEZE = gc.get_freeze_count() + 2000


@contextmanager
def _heap_frozen() -> Iterator[None]:
    """Fork workers with the parent's objects frozen out of the garbage collector's reach.

    A forked worker shares the parent's heap page by page until it writes to a
    page. A full collection in the worker visits every object it inherited
    (hundreds of thousands once torch is imported) and so writes to nearly every
    page: each worker ends up with a private copy of the heap (about 40 MiB here)
    and a pause of about 0.1 s. Frozen objects are never visited in the children;
    the parent gets its objects back at once (``unfreeze``, which also returns
    the few Python 3.12 freezes by itself to the collector). A program that froze
    its objects itself (more than ``_NOT_A_PROGRAMS_FREEZE``) is left alone:
    unfreezing would undo its freeze too.
    """
    if gc.get_freeze_count() > _NOT_A_PROGRAMS_FREEZE:
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()

