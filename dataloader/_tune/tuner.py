"""The autotuner at run time: measures each window of an epoch, asks the policy, applies it.

One :class:`Autotuner` lives as long as its loader, so that an epoch starts with the settings
the one before ended with. Each epoch attaches an :class:`EpochTuner` to its executor: the
executor calls :meth:`EpochTuner.tick` after every batch it hands out, and the epoch's
:class:`~dataloader.monitor.Recorder` tells the tuner's :class:`_Meter` of every batch made
(its time from the stage times each batch carries home) and every wait in ``next()``.

A window closes after :data:`WINDOW_SECONDS` (twice that where it judges a change) and
:data:`WINDOW_BATCHES` batches, and never while a worker just added has yet to make its first
few batches (its start-up is not what the larger pool makes). What the tuner sets goes to the executor's resizer; what it decided goes
to the recorder (``loader.stats().tuning``, the monitor's report, the trace).
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any, Protocol

import psutil

from ..memory import max_workers as worker_ceiling
from ..memory import memory_room
from ..monitor import Recorder, TuningChange
from .cpu import CpuMeter
from .policy import TRIAL_WINDOWS, Limits, Policy, Settings, Window

logger = logging.getLogger("dataloader")

# A window is at least this long and this many batches handed out (at most MAX_SECONDS long):
# long enough that the batch rate is measured to a few percent, short enough to settle in ~2 s.
WINDOW_SECONDS = 0.3
WINDOW_BATCHES = 4
MAX_SECONDS = 3.0
# Memory the pool leaves free: the share of the total that check_worker_memory keeps too.
MEMORY_MARGIN = 0.2
# A worker's own pages are measured again every this many windows (they grow as it runs).
MEASURE_EVERY = 10


class Lever(Protocol):
    """What the tuner changes: an executor's :class:`~dataloader._exec.resizing.PoolResizer`."""

    @property
    def size(self) -> int: ...

    @property
    def warming(self) -> bool: ...

    def resize(self, workers: int) -> None: ...

    def set_depth(self, messages_ahead: int) -> None: ...


class _Meter:
    """Sums over the current window, fed by the recorder."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.made = 0
        self.busy = 0.0
        self.squares = 0.0
        self.bytes = 0
        self.handed_out = 0
        self.wait = 0.0
        self.own = 0.0  # seconds of that wait the tuner itself spent (measuring, resizing)

    def made_batch(self, seconds: float, nbytes: int) -> None:
        self.made += 1
        self.busy += seconds
        self.squares += seconds * seconds
        self.bytes += nbytes

    def waited(self, seconds: float) -> None:
        self.handed_out += 1
        self.wait += seconds

    @property
    def cv(self) -> float:
        """Standard deviation over mean of the make times."""
        if self.made < 2 or self.busy <= 0:
            return 0.0
        mean = self.busy / self.made
        variance = max(0.0, self.squares / self.made - mean * mean)
        return math.sqrt(variance) / mean


class Autotuner:
    """Chooses a loader's worker count and prefetch depth, epoch after epoch.

    ``workers``/``depth``: whether each is tuned (else fixed at ``fixed_workers`` or
    ``fixed_depth``); ``threads``: thread workers, whose memory is the process's own.
    """

    def __init__(
        self, *, workers: bool, depth: bool, fixed_workers: int = 1, fixed_depth: int = 2, threads: bool = False,
        proc_root: str = "/proc",
    ) -> None:
        self.cpu = CpuMeter(proc_root)
        self.proc_root = proc_root
        room = memory_room(proc_root)
        cpus = self.cpu.usable
        # Two per CPU, within what the loader allows any pool here (ulimit -n, the CPUs).
        ceiling = worker_ceiling("thread" if threads else "process", proc_root)[0]
        self.limits = Limits(
            cpus=cpus,
            max_workers=min(max(1, 2 * math.ceil(cpus)), ceiling) if workers else fixed_workers,
            memory_margin=int(MEMORY_MARGIN * room.total),
            tune_workers=workers,
            tune_depth=depth,
        )
        # One worker to start: it overlaps loading with the loop at once, and the first window
        # says how many more the loop needs (as many as whole CPUs are idle at a time).
        start = Settings(workers=1 if workers else fixed_workers, depth=fixed_depth)
        self.policy = Policy(self.limits, start)
        self.threads = threads  # thread workers: a worker costs no memory of its own
        self._started = False
        self._room = room

    @property
    def settings(self) -> Settings:
        return self.policy.settings

    def estimate(self) -> str:
        """The starting point and its bounds, in words (the first record of the first epoch)."""
        limits, room = self.limits, self._room
        quota = "" if limits.cpus == int(limits.cpus) else " (cgroup quota)"
        return (
            f"start: {_workers(self.settings.workers)}, prefetch "
            f"{self.settings.depth}: {limits.cpus:g} usable CPUs{quota}, up to {limits.max_workers} "
            f"workers while CPUs are idle; memory room {room.available / 2**30:.1f} GiB ({room.source}), "
            f"{limits.memory_margin / 2**30:.1f} GiB kept free"
        )

    def attach(self, lever: Lever, recorder: Recorder, worker_pids: Any) -> "EpochTuner":
        """Tune one epoch through ``lever``; ``worker_pids()`` lists the live workers' pids
        (their memory is measured)."""
        if lever.size != self.settings.workers:
            lever.resize(self.settings.workers)  # a persistent pool, sized by the epoch before
        first, self._started = not self._started, True
        reason = self.estimate() if first else (
            f"start: {_workers(self.settings.workers)}, prefetch {self.settings.depth}, as the epoch before ended"
        )
        tuner = EpochTuner(self, lever, recorder, worker_pids)
        tuner.record(reason)
        return tuner


class EpochTuner:
    """The tuner of one epoch: closes windows and applies the policy's decisions."""

    def __init__(self, owner: Autotuner, lever: Lever, recorder: Recorder, worker_pids: Any) -> None:
        self._owner = owner
        self._lever = lever
        self._recorder = recorder
        self._worker_pids = worker_pids
        self._meter = _Meter()
        recorder.meter = self
        self._cpu = owner.cpu
        self._window_start = time.perf_counter()
        self._windows = 0
        self._worker_memory = 0
        self._primed = False  # the first window starts at the first batch: start-up is not measured

    # The recorder's calls (see Recorder.meter).
    def made(self, seconds: float, nbytes: int) -> None:
        self._meter.made_batch(seconds, nbytes)

    def waited(self, seconds: float) -> None:
        self._meter.waited(seconds)

    def tick(self) -> None:
        """A batch was handed out: close the window if it is long enough, and act on it."""
        now = time.perf_counter()
        if not self._primed:
            self._primed = True
            self._restart(now)
            return
        meter, elapsed = self._meter, now - self._window_start
        policy = self._owner.policy
        length = WINDOW_SECONDS * (TRIAL_WINDOWS if policy.judging else 1)
        if elapsed < length or (meter.handed_out < WINDOW_BATCHES and elapsed < MAX_SECONDS):
            return
        if self._lever.warming:
            self._restart(now)  # what a starting worker adds is not measured yet
            return
        window = self._window(elapsed)  # its CPU reading starts the next window's
        self._restart(now, cpu=False)
        try:
            self._decide(window)
        finally:
            # Inside next(): the loop waits for it, but that wait is the tuner's, not the loader's.
            self._meter.own = time.perf_counter() - now

    def _decide(self, window: Window) -> None:
        decision = self._owner.policy.decide(window)
        if decision is None:
            return
        settings = decision.settings
        if settings.workers != window.settings.workers:
            self._lever.resize(settings.workers)
        if settings.depth != window.settings.depth:
            self._lever.set_depth(settings.depth)
        self.record(decision.reason)

    def record(self, reason: str) -> None:
        settings, recorder = self._owner.settings, self._recorder
        seconds = time.perf_counter() - recorder.started
        change = TuningChange(recorder.handed_out, seconds, settings.workers, settings.depth, reason)
        recorder.tuned(change)
        logger.info("DataLoader autotune: %s", change.describe())

    def _window(self, elapsed: float) -> Window:
        meter = self._meter
        if self._windows % MEASURE_EVERY == 0:
            self._worker_memory = self._measure_worker()
        self._windows += 1
        return Window(
            seconds=elapsed,
            handed_out=meter.handed_out,
            wait=max(0.0, meter.wait - meter.own),
            made=meter.made,
            busy=meter.busy,
            make_cv=meter.cv,
            cpu_free=self._cpu.sample(),
            memory_room=memory_room(self._owner.proc_root).available,
            worker_memory=self._worker_memory,
            batch_bytes=meter.bytes // meter.made if meter.made else 0,
            settings=self._owner.settings,
        )

    def _restart(self, now: float, cpu: bool = True) -> None:
        self._meter.reset()
        self._window_start = now
        if cpu:
            self._cpu.sample()

    def _measure_worker(self) -> int:
        """Bytes a worker holds of its own (USS; RSS where smaps cannot be read); 0 for threads."""
        if self._owner.threads:
            return 0
        for pid in self._worker_pids():
            try:
                process = psutil.Process(pid)
                try:
                    return int(process.memory_full_info().uss)
                except (psutil.AccessDenied, AttributeError):
                    return int(process.memory_info().rss)
            except psutil.Error:
                continue
        return 0


def _workers(count: int) -> str:
    return f"{count} worker{'s' * (count != 1)}"
