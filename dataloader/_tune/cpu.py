"""How much CPU this process may use, and how much of it is free right now.

The autotuner grows the worker pool only while CPUs sit idle: another worker on a saturated
machine, or in a cgroup already using its whole quota, only adds contention. Two limits apply:
the CPUs in this process's affinity set, whose idle time the kernel counts in ``/proc/stat``,
and the cgroup's CPU quota, which throttles the group however idle the machine is. Every
filesystem root, clock and counter is a parameter so that tests can feed synthetic values.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Collection, NamedTuple, Sequence

import psutil

from ..memory import cgroup_cpu_seconds, cpu_quota

__all__ = ["CpuMeter", "usable_cpus"]

_MIN_CPUS = 0.1  # a floor, so that a tiny quota never reads as "no CPU at all"


def _affinity() -> frozenset[int]:
    """The CPU ids this process may run on (all of them where the OS cannot say)."""
    try:
        return frozenset(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return frozenset(range(os.cpu_count() or 1))


def usable_cpus(proc_root: str = "/proc") -> float:
    """CPUs this process may use: its affinity set, capped by the cgroup quota (not rounded)."""
    cpus = float(len(_affinity()))
    quota = cpu_quota(proc_root)
    return max(_MIN_CPUS, min(cpus, quota) if quota is not None else cpus)


class _Reading(NamedTuple):
    at: float  # the clock, in seconds
    idle: list[float]  # each CPU's idle seconds so far, in /proc/stat's order
    used: float | None  # the cgroup's CPU seconds so far; None unread or unreadable


def _idle_seconds(times: Any) -> float:
    """Seconds a CPU spent idle, counting I/O wait (the CPU was free to run something else)."""
    return float(times.idle) + float(getattr(times, "iowait", 0.0))


class CpuMeter:
    """Measures the CPUs' worth of time left free between two :meth:`sample` calls.

    Free time is the smaller of the idle time of the CPUs in the affinity set and, where the
    cgroup has a quota, the quota less the group's own usage rate: idle CPUs the quota forbids
    are not free to this process. ``clock``, ``cpu_times`` (called as ``cpu_times(percpu=True)``,
    like :func:`psutil.cpu_times`) and ``affinity`` can be replaced for tests.
    """

    def __init__(
        self,
        proc_root: str = "/proc",
        *,
        clock: Callable[[], float] = time.monotonic,
        cpu_times: Callable[..., Sequence[Any]] = psutil.cpu_times,
        affinity: Callable[[], Collection[int]] = _affinity,
    ) -> None:
        self._proc_root = proc_root
        self._clock = clock
        self._cpu_times = cpu_times
        self._affinity = affinity
        self._quota = cpu_quota(proc_root)
        self.usable: float = usable_cpus(proc_root)
        """CPUs this process may use (:func:`usable_cpus`), read once at construction."""
        self._last: _Reading | None = None

    def _read(self) -> _Reading:
        """The clock, each CPU's idle seconds and, where there is a quota, the group's usage."""
        used = cgroup_cpu_seconds(self._proc_root) if self._quota is not None else None
        idle = [_idle_seconds(t) for t in self._cpu_times(percpu=True)]
        return _Reading(self._clock(), idle, used)

    def sample(self) -> float | None:
        """CPUs' worth of time free since the previous call; None on the first call.

        Also None when no time has passed on the clock; the previous reading is then kept, so
        that the next call measures the whole interval. Where the group's usage cannot be read,
        the quota alone caps the idle time.
        """
        now, last = self._read(), self._last
        if last is not None and now.at <= last.at:
            return None
        self._last = now
        if last is None:
            return None
        elapsed = now.at - last.at
        # psutil lists /proc/stat's CPUs by position, which is the CPU id while none is offline;
        # an id past the end of the list is skipped rather than misread.
        known = min(len(now.idle), len(last.idle))
        cpus = [cpu for cpu in self._affinity() if cpu < known]
        idle = sum(now.idle[cpu] - last.idle[cpu] for cpu in cpus) / elapsed
        free = min(max(0.0, idle), float(len(cpus)))
        if self._quota is not None:
            used = 0.0
            if now.used is not None and last.used is not None:
                used = (now.used - last.used) / elapsed
            free = min(free, max(0.0, self._quota - used))
        return free
