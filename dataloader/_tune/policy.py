"""The autotuner's policy: from what the last window of an epoch measured, the next settings.

Pure: no clock, no processes, no files. The runtime (``tuner.py``) feeds it one
:class:`Window` at a time and applies the :class:`Decision` it returns, if any; tests feed it
recorded or synthetic windows. The rules, in order:

1. **Check the last change.** A pool grown while the loop waited must have made batches
   faster (by :data:`PAYS`); if not, the extra workers go and that size is the ceiling (a
   stream read in the main process, the GIL, memory bandwidth: more workers do not help). A
   pool shrunk while the loop did not wait must not make it wait; if it does, the workers come
   back and that size is the floor. The window that judges a change is :data:`TRIAL_WINDOWS`
   long, and starts once the new workers have made their first batches. A ceiling or floor holds
   until the batch times or the loop's step change by :data:`REGIME` for two windows running (or
   for :data:`HOLD` windows): no probing back and forth while nothing changed.
2. **Memory first.** Below the memory margin, one worker goes, whatever else holds (it grows
   back only once a worker and its batches fit above the margin again: a band, not a flip).
3. **Grow while the loop waits** (more than :data:`WAIT_HIGH` of the window) and CPUs are
   idle: by as many workers as whole idle CPUs (at least one where :data:`CPU_SLACK` is idle),
   no more than the batch times say the loop needs (the time to make a batch over the loop's
   own time per batch), within the ceiling, ``max_workers`` and the memory room that each
   worker and its batches in flight take.
4. **Shrink while workers idle**: the loop barely waits (under :data:`WAIT_LOW`) and the
   workers were busy less than :data:`BUSY_LOW` of the time, for :data:`PATIENCE` windows
   running: down to the count that would be :data:`BUSY_TARGET` busy.
5. **Prefetch depth from the spread of batch times**: ``2 + 2 * cv`` messages per worker
   (``cv``: standard deviation over mean of the time to make a batch), within
   ``max_depth`` and half the memory room, changed only when the same new depth is asked
   for :data:`PATIENCE` windows running.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

# The loop waited more than this share of a window: the loader is what it waits for.
WAIT_HIGH = 0.05
# Under this share it barely waits: the loader keeps up.
WAIT_LOW = 0.02
# Workers busy less than this share of a window, with the loop not waiting, have time to spare.
BUSY_LOW = 0.6
# A smaller pool is sized to be this busy, which leaves room for batch times to vary.
BUSY_TARGET = 0.8
# Headroom: a pool sized from batch times is this much larger than the times say it must be.
GAIN = 1.05
# A larger pool must make batches at least this much faster, or it was not worth its workers
# (small: where it is in doubt, the larger pool is kept; a rate is measured to a few percent).
PAYS = 1.02
# CPUs idle for a pool to grow: half a CPU (one more worker can still run at half speed).
CPU_SLACK = 0.5
# A learnt ceiling or floor holds while the time to make a batch and the loop's step stay within
# this factor of what they were when it was learnt (a new regime: the dataset slowed down, the
# training step changed), and at most HOLD windows (what else changes is not measured).
REGIME = 1.3
HOLD = 200
# Windows running a shrink or a new depth must be asked for.
PATIENCE = 2
# The window that judges a change is this many windows long: a rate measured to a few percent.
TRIAL_WINDOWS = 2


@dataclass(frozen=True)
class Settings:
    """What the tuner sets: worker count and messages of tasks each worker may have ahead."""

    workers: int
    depth: int


@dataclass(frozen=True)
class Limits:
    """Bounds that do not change while the loader runs."""

    cpus: float  # usable: the affinity set, capped by the cgroup quota
    max_workers: int
    memory_margin: int  # bytes of memory room the pool must leave free
    max_depth: int = 8
    tune_workers: bool = True
    tune_depth: bool = True


@dataclass(frozen=True)
class Window:
    """What one stretch of an epoch measured, with the settings it ran under."""

    seconds: float  # wall time
    handed_out: int  # batches the loop took
    wait: float  # seconds the loop spent in next()
    made: int  # batches the workers finished
    busy: float  # worker-seconds spent making them (fetch, transform, collate)
    make_cv: float  # spread of the time to make a batch: standard deviation over mean
    cpu_free: float | None  # CPUs idle over the window (None: unknown)
    memory_room: int  # bytes available now
    worker_memory: int  # bytes one more worker costs (its own pages; 0 for a thread)
    batch_bytes: int  # mean bytes of a batch in flight
    settings: Settings

    @property
    def wait_fraction(self) -> float:
        return min(1.0, self.wait / self.seconds) if self.seconds > 0 else 0.0

    @property
    def rate(self) -> float:
        """Batches handed out per second."""
        return self.handed_out / self.seconds if self.seconds > 0 else 0.0

    @property
    def busy_fraction(self) -> float:
        """How busy the workers were, on average."""
        capacity = self.settings.workers * self.seconds
        return min(1.0, self.busy / capacity) if capacity > 0 else 0.0

    @property
    def make_seconds(self) -> float:
        """Worker-seconds to make one batch."""
        return self.busy / self.made if self.made else 0.0

    @property
    def step_seconds(self) -> float:
        """Seconds the loop spent on each batch outside next() (its training step)."""
        return max(0.0, self.seconds - self.wait) / self.handed_out if self.handed_out else 0.0


@dataclass(frozen=True)
class Decision:
    """New settings and why, in words."""

    settings: Settings
    reason: str


@dataclass(frozen=True)
class _Bound:
    """A worker count learnt to be the most (or fewest) worth having, and the regime it holds in."""

    workers: int
    make: float
    step: float
    windows: int = HOLD
    strikes: int = 0  # windows running out of the regime (one may be noise; two are not)

    def after(self, window: Window) -> "_Bound | None":
        """This bound after ``window``, or None once it no longer holds."""
        inside = _near(window.make_seconds, self.make) and _near(window.step_seconds, self.step)
        strikes = 0 if inside else self.strikes + 1
        if self.windows <= 1 or strikes >= 2:
            return None
        return replace(self, windows=self.windows - 1, strikes=strikes)


def _near(now: float, then: float) -> bool:
    """Within REGIME of each other (times under a tenth of a millisecond count as equal)."""
    now, then = max(now, 1e-4), max(then, 1e-4)
    return max(now, then) / min(now, then) <= REGIME


@dataclass(frozen=True)
class _Trial:
    """A change waiting for the next window to show whether it paid."""

    grew: bool
    before: Settings
    rate: float
    make: float  # the batch time and the loop's step before the change: the regime a bound is
    step: float  # learnt in (with more workers on busy CPUs, each batch takes longer)


class Policy:
    """Turns windows into decisions, remembering what the last changes showed."""

    def __init__(self, limits: Limits, start: Settings) -> None:
        self.limits = limits
        self.settings = start
        self._trial: _Trial | None = None
        self._ceiling: _Bound | None = None
        self._floor: _Bound | None = None
        self._idle_windows = 0  # windows running with workers to spare
        self._depth_asked: tuple[int, int] = (start.depth, 0)  # (depth, windows running)

    @property
    def judging(self) -> bool:
        """Whether the next window judges a change (the runtime makes it longer: TRIAL_WINDOWS)."""
        return self._trial is not None

    def decide(self, window: Window) -> Decision | None:
        """The settings after ``window``, or None to keep them."""
        self._tick_bounds(window)
        decision = self._judge_trial(window) or self._memory(window) or self._workers(window)
        depth = self._depth(window, decision.settings.workers if decision else self.settings.workers)
        if depth is not None:
            settings = replace(decision.settings if decision else self.settings, depth=depth)
            reason = _depth_reason(self.settings.depth, depth, window)
            decision = Decision(settings, f"{decision.reason}; {reason}" if decision else reason)
        if decision is not None:
            self.settings = decision.settings
        return decision

    def _judge_trial(self, window: Window) -> Decision | None:
        trial, self._trial = self._trial, None
        if trial is None:
            return None
        now, before = window.settings.workers, trial.before.workers
        if trial.grew and window.wait_fraction > WAIT_LOW and window.rate < trial.rate * PAYS:
            self._ceiling = _Bound(before, trial.make, trial.step)
            return Decision(
                replace(self.settings, workers=before),
                f"{now} -> {before} workers: {now} made {window.rate:.1f} batches/s against "
                f"{trial.rate:.1f} with {before}, not {PAYS - 1:.0%} more; {before} is the most for now",
            )
        if not trial.grew and window.wait_fraction > WAIT_HIGH and window.rate * PAYS < trial.rate:
            self._floor = _Bound(before, trial.make, trial.step)
            return Decision(
                replace(self.settings, workers=before),
                f"{now} -> {before} workers: with {now} the loop waited {window.wait_fraction:.0%} "
                f"of {window.seconds:.1f} s and got {window.rate:.1f} batches/s against "
                f"{trial.rate:.1f}; {before} is the fewest for now",
            )
        return None

    def _memory(self, window: Window) -> Decision | None:
        workers = self.settings.workers
        if window.memory_room >= self.limits.memory_margin or workers <= 1 or not self.limits.tune_workers:
            return None
        return Decision(
            replace(self.settings, workers=workers - 1),
            f"{workers} -> {workers - 1} workers: memory room {_size(window.memory_room)} is below "
            f"the {_size(self.limits.memory_margin)} kept free",
        )

    def _workers(self, window: Window) -> Decision | None:
        if not self.limits.tune_workers or window.handed_out == 0:
            return None
        if window.wait_fraction > WAIT_HIGH:
            self._idle_windows = 0
            return self._grow(window)
        if window.wait_fraction < WAIT_LOW and window.busy_fraction < BUSY_LOW:
            self._idle_windows += 1
            if self._idle_windows >= PATIENCE:
                return self._shrink(window)
        else:
            self._idle_windows = 0
        return None

    def _grow(self, window: Window) -> Decision | None:
        workers = self.settings.workers
        free = window.cpu_free if window.cpu_free is not None else max(0.0, self.limits.cpus - window.busy_fraction * workers)
        if free < CPU_SLACK:
            # No CPU idle. One more worker could still gain a few percent (the main process or a
            # worker waits on something else at times), but that is within what a window's rate
            # measures on a busy machine: probing for it was tried and chased noise.
            return None
        # The loop takes a batch every step_seconds; a worker makes one every make_seconds.
        step = window.step_seconds
        needed = math.ceil(window.make_seconds / step * GAIN) if step > 0 else self.limits.max_workers
        cap = min(self.limits.max_workers, self._ceiling.workers if self._ceiling else self.limits.max_workers)
        cost = window.worker_memory + window.batch_bytes * self.settings.depth
        room = window.memory_room - self.limits.memory_margin
        by_memory = workers + (int(room // cost) if cost > 0 else self.limits.max_workers)
        target = min(needed, workers + max(1, int(free)), cap, by_memory)
        if target <= workers:
            return None
        self._trial = _Trial(True, self.settings, window.rate, window.make_seconds, window.step_seconds)
        return Decision(
            replace(self.settings, workers=target),
            f"{workers} -> {target} workers: the loop waited {window.wait_fraction:.0%} of the last "
            f"{window.seconds:.1f} s, {free:.1f} CPUs idle, memory room {_size(window.memory_room)}",
        )

    def _shrink(self, window: Window) -> Decision | None:
        workers = self.settings.workers
        floor = max(1, self._floor.workers if self._floor else 1)
        target = max(floor, math.ceil(window.busy_fraction * workers / BUSY_TARGET))
        if target >= workers:
            return None
        self._idle_windows = 0
        self._trial = _Trial(False, self.settings, window.rate, window.make_seconds, window.step_seconds)
        return Decision(
            replace(self.settings, workers=target),
            f"{workers} -> {target} workers: the loop waited {window.wait_fraction:.0%} of the last "
            f"{window.seconds:.1f} s and the workers were {window.busy_fraction:.0%} busy",
        )

    def _depth(self, window: Window, workers: int) -> int | None:
        """A new prefetch depth, once asked for PATIENCE windows running; None to keep it."""
        if not self.limits.tune_depth or window.made < 2:
            return None
        wanted = min(self.limits.max_depth, max(2, round(2 + 2 * window.make_cv)))
        room = max(0, window.memory_room - self.limits.memory_margin) // 2
        if window.batch_bytes > 0:
            wanted = max(1, min(wanted, room // (window.batch_bytes * max(1, workers))))
        asked, running = self._depth_asked
        running = running + 1 if wanted == asked else 1
        self._depth_asked = (wanted, running)
        if wanted == self.settings.depth or running < PATIENCE:
            return None
        return int(wanted)

    def _tick_bounds(self, window: Window) -> None:
        """Forget a ceiling or floor learnt in another regime, or long ago."""
        self._ceiling = self._ceiling.after(window) if self._ceiling else None
        self._floor = self._floor.after(window) if self._floor else None


def _depth_reason(before: int, after: int, window: Window) -> str:
    return (
        f"prefetch {before} -> {after}: batch times vary by {window.make_cv:.0%} of their mean, "
        f"memory room {_size(window.memory_room)}"
    )


def _size(count: float) -> str:
    """Bytes in words: 3.2 GiB, 450 MiB."""
    return f"{count / 2**30:.1f} GiB" if count >= 2**30 else f"{count / 2**20:.0f} MiB"
