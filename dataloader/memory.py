"""Memory checks that warn before the kernel kills anyone.

Workers die quietly when memory runs out: the OOM killer sends SIGKILL when a cgroup passes its
limit, and a full ``/dev/shm`` turns into SIGBUS. This module reads the numbers behind both
(cgroup v1/v2 limits, ``/dev/shm`` room, RSS/PSS of the worker tree), checks them before workers
start and words a diagnosis when one died anyway. Readers return None for a missing, unreadable or
odd file rather than raise (a memory check must never be what breaks loading), and every
filesystem root is a parameter so that tests can hand in fake trees.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import re
import resource
import threading
from dataclasses import dataclass
from typing import Any, Iterator, NamedTuple

import psutil

from ._validate import check_non_negative_int
from .errors import SharedMemoryError

__all__ = [
    "CgroupMemory", "MemoryRoom", "PeakMemory", "ShmRoom", "TreeMemory", "WorkerMemoryEstimate",
    "available_cpus", "cgroup_cpu_seconds", "cgroup_memory", "check_shm", "check_worker_memory",
    "cpu_quota", "describe_oom", "describe_shm", "max_workers", "memory_room", "process_tree_memory",
    "shm_ceiling", "shm_room",
]

logger = logging.getLogger("dataloader")

_MIB = 1024 * 1024
_V1_UNLIMITED = 2**60  # v1 writes "no limit" as a huge page-rounded number (9223372036854771712)
_WARN_FRACTION = 0.8  # leave a fifth for the main process's growth, the page cache and the model
_OOM_FRACTION = 0.9  # a group this full is an allocation or two away from the OOM killer
_SHM_FIX = (
    "run the container with a larger --shm-size (e.g. --shm-size=2g), or lower the loader's "
    "shared-memory budget (shm_budget=...), or use fewer workers"
)
_WORKER_FIX = (
    "use fewer workers; keep the dataset's data in NumPy arrays or Arrow tables instead of "
    "Python lists/dicts (reading Python objects in forked workers touches their reference "
    "counts and copies every page: the copy-on-write trap); or lower shm_budget"
)


@dataclass(frozen=True)
class CgroupMemory:
    """This process's cgroup memory numbers; None where unknown (``limit``: also unlimited)."""
    version: int | None
    limit: int | None
    usage: int | None
    path: str | None
    inactive_file: int | None = None  # page cache inside ``usage`` the kernel can drop

    @property
    def working_set(self) -> int | None:
        """Usage less inactive page cache: what reclaim cannot free (the kubelet's measure)."""
        return None if self.usage is None else max(0, self.usage - (self.inactive_file or 0))


@dataclass(frozen=True)
class MemoryRoom:
    """Effective total and available bytes, and where they came from ("system", "cgroup v2 …")."""
    total: int
    available: int
    source: str


@dataclass(frozen=True)
class ShmRoom:
    """Size and free bytes of a shared-memory filesystem such as ``/dev/shm``."""
    path: str
    total: int
    free: int


@dataclass(frozen=True)
class TreeMemory:
    """Memory of a process and its descendants; ``pss`` is None unless every one reported it.

    ``pss_shmem`` is the part of ``pss`` in shared memory (memfd, /dev/shm, shared
    anonymous maps), None where the kernel does not say (Linux < 5.x, other systems).
    """
    rss: int
    pss: int | None
    processes: int
    pss_shmem: int | None = None


@dataclass(frozen=True)
class WorkerMemoryEstimate:
    """What :func:`check_worker_memory` computed, and whether it warned."""
    num_workers: int
    per_worker_bytes: int
    transport_budget_bytes: int
    need: int
    available: int
    source: str
    warned: bool


_Mount = NamedTuple(
    "_Mount", [("root", str), ("point", str), ("fstype", str), ("options", frozenset)]
)
_Group = NamedTuple("_Group", [("version", int), ("directory", str), ("mount", str)])


def _read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError, ValueError):
        return None


def _read_int(path: str) -> int | None:
    """A byte count from ``path``; None if missing, empty, "max", negative or garbage."""
    try:
        value = int((_read_text(path) or "").strip())
    except ValueError:
        return None
    return value if value >= 0 else None


def _read_stat(path: str, key: str) -> int | None:
    """The value of ``key`` in a "key value" per line file (memory.stat, memory.events)."""
    for line in (_read_text(path) or "").splitlines():
        name, _, value = line.partition(" ")
        if name == key and value.strip().isdigit():
            return int(value)
    return None


def _read_mounts(proc_root: str) -> list[_Mount]:
    """Mountinfo: root and mount point are fields 4 and 5; fstype and options follow the "-"."""
    mounts = []
    for line in (_read_text(os.path.join(proc_root, "self", "mountinfo")) or "").splitlines():
        fields = line.split()
        sep = fields.index("-", 6) if "-" in fields[6:] else len(fields)
        if len(fields) < sep + 2:
            continue
        options = frozenset(fields[sep + 3].split(",")) if len(fields) > sep + 3 else frozenset()
        root, point = (re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), f) for f in fields[3:5])
        mounts.append(_Mount(root, point, fields[sep + 1], options))
    return mounts


def _relative(path: str, root: str) -> str | None:
    """``path`` below a mount's ``root`` (containers may show the host's path), or None."""
    root = root.rstrip("/")
    if not root:
        return path
    if path == root:
        return "/"
    return path[len(root):] if path.startswith(root + "/") else None


def _resolve(path: str, mounts: list[_Mount], version: int) -> _Group | None:
    if not mounts:
        return None
    matching = [m for m in mounts if _relative(path, m.root) is not None]
    mount = max(matching, key=lambda m: len(m.root)) if matching else mounts[0]
    point = os.path.normpath(mount.point)
    relative = (_relative(path, mount.root) or path).lstrip("/")
    directory = os.path.normpath(os.path.join(point, relative))
    inside = directory == point or directory.startswith(point.rstrip("/") + "/")
    if not inside or not os.path.isdir(directory):  # a "/.." path, or a group not visible here
        directory = point
    return _Group(version, directory, point)


def _find_group(proc_root: str, controller: str) -> _Group | None:
    """This process's group for ``controller``: a v1 hierarchy first (hybrid hosts), then v2."""
    lines = (_read_text(os.path.join(proc_root, "self", "cgroup")) or "").splitlines()
    entries = [[p.strip() for p in line.split(":", 2)] for line in lines if line.count(":") >= 2]
    mounts = _read_mounts(proc_root)
    v1 = [m for m in mounts if m.fstype == "cgroup" and controller in m.options]
    for hierarchy, controllers, path in entries:
        if hierarchy != "0" and controller in controllers.split(",") and v1:
            return _resolve(path, v1, 1)
    v2 = [m for m in mounts if m.fstype == "cgroup2"]
    for hierarchy, controllers, path in entries:
        if hierarchy == "0" and not controllers:
            return _resolve(path, v2, 2)
    return None


def _up_to_mount(group: _Group) -> Iterator[str]:
    """The group's directory, then each parent up to the mount point (ancestors' limits apply)."""
    directory = group.directory
    yield directory
    while directory != group.mount and os.path.dirname(directory) != directory:
        directory = os.path.dirname(directory)
        yield directory


def _read_limit(path: str, version: int) -> int | None:
    value = _read_int(path)  # v2 "max" reads as None
    return None if value is None or (version == 1 and value >= _V1_UNLIMITED) else value


def cgroup_memory(proc_root: str = "/proc") -> CgroupMemory:
    """This process's cgroup memory limit (the smallest along its ancestors) and usage."""
    group = _find_group(proc_root, "memory")
    if group is None:
        return CgroupMemory(None, None, None, None)
    v2, here = group.version == 2, group.directory
    limit_file = "memory.max" if v2 else "memory.limit_in_bytes"
    limits = [_read_limit(os.path.join(d, limit_file), group.version) for d in _up_to_mount(group)]
    known = [limit for limit in limits if limit is not None]
    return CgroupMemory(
        version=group.version,
        limit=min(known) if known else None,
        usage=_read_int(os.path.join(here, "memory.current" if v2 else "memory.usage_in_bytes")),
        path=here,
        inactive_file=_read_stat(
            os.path.join(here, "memory.stat"), "inactive_file" if v2 else "total_inactive_file"
        ),
    )


def _quota_at(directory: str, version: int) -> float | None:
    if version == 2:
        text = _read_text(os.path.join(directory, "cpu.max")) or ""
    else:
        names = ("cpu.cfs_quota_us", "cpu.cfs_period_us")
        text = " ".join((_read_text(os.path.join(directory, n)) or "").strip() for n in names)
    try:
        quota, period = (int(part) for part in text.split())
    except ValueError:  # "max 100000", missing or garbage
        return None
    return quota / period if quota > 0 and period > 0 else None


def cpu_quota(proc_root: str = "/proc") -> float | None:
    """CPUs' worth of time the cgroup may use (``cpu.max``, CFS quota/period); None if unlimited."""
    group = _find_group(proc_root, "cpu")
    if group is None:
        return None
    quotas = [q for d in _up_to_mount(group) if (q := _quota_at(d, group.version)) is not None]
    return min(quotas) if quotas else None


def cgroup_cpu_seconds(proc_root: str = "/proc") -> float | None:
    """CPU seconds the cgroup has used (v2 ``cpu.stat`` usage_usec, v1 ``cpuacct.usage``)."""
    group = _find_group(proc_root, "cpuacct")  # v1 "cpuacct" or "cpu,cpuacct"; else the v2 group
    if group is None:
        return None
    if group.version == 2:
        usec = _read_stat(os.path.join(group.directory, "cpu.stat"), "usage_usec")
        return None if usec is None else usec / 1e6
    nsec = _read_int(os.path.join(group.directory, "cpuacct.usage"))
    return None if nsec is None else nsec / 1e9


def available_cpus(proc_root: str = "/proc") -> int:
    """CPUs this process may use: its affinity set, capped by the cgroup quota rounded up."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    quota = cpu_quota(proc_root)
    return max(1, min(cpus, math.ceil(quota)) if quota is not None else cpus)


def memory_room(proc_root: str = "/proc") -> MemoryRoom:
    """Total and available bytes: the cgroup's when it has a limit, else the system's.

    Available is the limit less the working set (reclaimable cache does not count), capped by the
    system's numbers because a limit may exceed the machine.
    """
    system = psutil.virtual_memory()
    group = cgroup_memory(proc_root)
    if group.limit is None:
        return MemoryRoom(int(system.total), int(system.available), "system")
    free = max(0, group.limit - (group.working_set or 0))
    return MemoryRoom(
        total=min(group.limit, int(system.total)),
        available=min(free, int(system.available)),
        source=f"cgroup v{group.version} {group.path}",
    )


def shm_room(path: str = "/dev/shm") -> ShmRoom | None:
    """Size and free bytes of the filesystem at ``path``; None if it is missing or unreadable."""
    try:
        stat = os.statvfs(path)
    except (OSError, ValueError, TypeError):
        return None
    return ShmRoom(str(path), stat.f_blocks * stat.f_frsize, stat.f_bavail * stat.f_frsize)


def shm_ceiling(path: str = "/dev/shm") -> tuple[int, str]:
    """The most shared memory this machine could ever hold, and what bounds it.

    Segments are ``memfd`` files, backed by RAM or swap (a cgroup limit may be raised later, so it
    is not the bound); where ``memfd_create`` is missing they live in ``path``, whose size bounds
    them. A shared-memory budget above this is a mistake, not a cap (``shm_budget=2**62``).
    """
    machine = int(psutil.virtual_memory().total) + int(psutil.swap_memory().total)
    room = None if hasattr(os, "memfd_create") else shm_room(path)
    if room is not None and room.total < machine:
        return room.total, f"the size of {room.path}"
    return machine, "the RAM and swap of this machine"


def check_shm(budget_bytes: int, path: str = "/dev/shm") -> ShmRoom | None:
    """Raise :class:`SharedMemoryError` if ``path`` has less free room than ``budget_bytes``.

    The transport allocates with ``memfd_create`` first, which is charged to the cgroup's memory
    and not to ``/dev/shm``; call this only when it falls back to ``/dev/shm`` segments, where
    Docker's 64 MiB default makes workers die of SIGBUS. Returns the room found, or None (with a
    warning) when ``path`` cannot be read.
    """
    budget = check_non_negative_int("budget_bytes", budget_bytes)
    room = shm_room(path)
    if room is None:
        logger.warning("Cannot read %s; skipping the shared-memory size check.", path)
        return None
    if room.free < budget:
        raise SharedMemoryError(
            f"{path} has {_mib(room.free)} free of {_mib(room.total)}, less than the loader's "
            f"shared-memory budget of {_mib(budget)}. To fix: {_SHM_FIX}."
        )
    return room


def process_tree_memory(pid: int | None = None) -> TreeMemory:
    """RSS, and PSS (shared pages counted once), of ``pid`` (None: this process) and descendants."""
    try:
        root = psutil.Process(pid)
        processes = [root, *root.children(recursive=True)]
    except (psutil.Error, OSError):
        return TreeMemory(0, None, 0)
    rss, pss, shmem, counted, pss_known, shmem_known = 0, 0, 0, 0, True, True
    for process in processes:
        try:
            rss += process.memory_info().rss
        except (psutil.Error, OSError):
            continue  # vanished, or not ours to read
        counted += 1
        try:
            pss += process.memory_full_info().pss
        except (psutil.Error, OSError, AttributeError):  # no smaps access, or no pss on this OS
            pss_known = False
        own = _pss_shmem(process.pid)
        shmem_known = shmem_known and own is not None
        shmem += own or 0
    pss_total = pss if pss_known and counted else None
    return TreeMemory(rss, pss_total, counted, shmem if pss_total is not None and shmem_known else None)


class PeakMemory:
    """The peak PSS of this process and its descendants (workers included), sampled by a thread.

    ``with PeakMemory() as memory:`` samples every ``interval`` s (one sample costs a few ms of
    this process's time, hence 0.1 s) until the block ends; ``memory.peak_pss`` is the peak in
    bytes (RSS where PSS cannot be read). ``reset()`` starts a new peak; ``with
    memory.paused():`` holds sampling off, e.g. while processes are forked, so that no child is
    born while the sampling thread is inside psutil.
    """

    def __init__(self, interval: float = 0.1) -> None:
        self.peak_pss = 0
        self._interval = interval
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="dataloader-peak-memory", daemon=True)

    def __enter__(self) -> PeakMemory:
        self.sample()  # psutil's lazy imports happen here, before any fork
        self._thread.start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self._stop.set()
        self._thread.join()

    def sample(self) -> None:
        """Take one sample now."""
        with self._lock:
            self._record(process_tree_memory())

    def _record(self, memory: TreeMemory) -> None:
        self.peak_pss = max(self.peak_pss, memory.pss if memory.pss is not None else memory.rss)

    def reset(self) -> None:
        """Forget the peak so far."""
        with self._lock:
            self._reset()

    def _reset(self) -> None:
        self.peak_pss = 0

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """No sample is taken inside this block."""
        with self._lock:
            yield

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            self.sample()


def _pss_shmem(pid: int) -> int | None:
    """``Pss_Shmem`` of /proc/PID/smaps_rollup in bytes, or None where it is missing."""
    for line in (_read_text(f"/proc/{pid}/smaps_rollup") or "").splitlines():
        if line.startswith("Pss_Shmem:"):
            return int(line.split()[1]) * 1024
    return None


def check_worker_memory(
    num_workers: int,
    per_worker_bytes: int | None,
    transport_budget_bytes: int,
    room: MemoryRoom | None = None,
) -> WorkerMemoryEstimate:
    """Warn if ``num_workers`` copies of the main process plus the transport may not fit.

    ``per_worker_bytes`` (None: this process's RSS) bounds a forked worker that ends up copying
    every page it inherited, which is what iterating Python objects does. Called before workers
    start so that the warning comes before the OOM killer, not after.
    """
    workers = check_non_negative_int("num_workers", num_workers)
    transport = check_non_negative_int("transport_budget_bytes", transport_budget_bytes)
    if per_worker_bytes is None:
        per_worker = int(psutil.Process().memory_info().rss)
    else:
        per_worker = check_non_negative_int("per_worker_bytes", per_worker_bytes)
    room = room if room is not None else memory_room()
    need = workers * per_worker + transport
    warned = need > _WARN_FRACTION * room.available
    if warned:
        logger.warning(
            "%d workers x %s + %s transport budget = %s, more than %d%% of the %s available (%s); "
            "the kernel may kill workers or the main process for lack of memory. To fix: %s.",
            workers, _mib(per_worker), _mib(transport), _mib(need), round(_WARN_FRACTION * 100),
            _mib(room.available), room.source, _WORKER_FIX,
        )
    return WorkerMemoryEstimate(
        workers, per_worker, transport, need, room.available, room.source, warned
    )


def describe_oom(proc_root: str = "/proc") -> str:
    """One sentence on memory use against its limit, and whether the OOM killer is likely."""
    try:
        group = cgroup_memory(proc_root)
        if group.limit is not None and group.working_set is not None:
            used, total = group.working_set, group.limit
            where = f"cgroup v{group.version} {group.path} uses {_mib(used)}"
            where += f" of its {_mib(total)} limit"
        else:
            system = psutil.virtual_memory()
            used, total = int(system.total - system.available), int(system.total)
            where = f"no cgroup memory limit; the system uses {_mib(used)} of {_mib(total)}"
        share = used / total if total > 0 else 1.0
        verdict = "the kernel's OOM killer is the likely cause"
        if share < _OOM_FRACTION:
            verdict = "the OOM killer is an unlikely cause, unless memory peaked and was freed"
        kind = "memory.events" if group.version == 2 else "memory.oom_control"
        kills = _read_stat(os.path.join(group.path, kind), "oom_kill") if group.path else None
        if kills:
            verdict = f"the cgroup has recorded {kills} OOM kill(s): the likely cause"
        return f"Memory: {where} ({share:.0%}); {verdict}."
    except Exception as error:  # noqa: BLE001 - a diagnosis must never raise
        return f"Memory: could not read memory usage ({type(error).__name__}: {error})."


def describe_shm(path: str = "/dev/shm") -> str:
    """One sentence on the size and free room of ``path``, to explain a worker's SIGBUS."""
    try:
        room = shm_room(path)
        if room is None:
            return f"Shared memory: {path} is missing or unreadable."
        text = f"Shared memory: {path} has {_mib(room.free)} free of {_mib(room.total)}"
        if room.free < 0.1 * room.total or room.total == 0:
            return f"{text}; a full {path} kills workers with SIGBUS. To fix: {_SHM_FIX}."
        return f"{text}; a full {path} is an unlikely cause of a SIGBUS."
    except Exception as error:  # noqa: BLE001 - a diagnosis must never raise
        return f"Shared memory: could not read {path} ({type(error).__name__}: {error})."


def _mib(n: int) -> str:
    return f"{n / _MIB:.1f} MiB"


# File descriptors a running worker holds in the main process, measured from /proc/self/fd while
# loaders of 1, 4 and 8 workers ran (tests/_workers/test_resource_limits.py checks them): a
# process 4 (its connection, its stack pipe, multiprocessing's two sentinel pipe ends), a thread
# 6 (a message pipe each way and its exit pipe). A process started later than its pool (by the
# autotuner, or as a replacement) holds LATE_WORKER_EXTRA more: its own "parent alive" pipe.
DESCRIPTORS_PER_WORKER = {"process": 4, "thread": 6}
LATE_WORKER_EXTRA = 1
# Descriptors left to the rest of the program (its files and sockets, the pool's own pipes), or
# a quarter of the limit where that is small.
_DESCRIPTOR_RESERVE = 64
# More workers than this many per usable CPU only queue for the CPUs (each with its own memory);
# a floor keeps waiting-bound pools (remote reads) possible on small machines.
WORKERS_PER_CPU = 32
_MIN_WORKER_LIMIT = 64


def max_workers(worker_type: str = "process", proc_root: str = "/proc") -> tuple[int, str]:
    """The most workers of ``worker_type`` a loader may start here, and why that many.

    The smaller of what the open-files limit (``ulimit -n``) leaves room for, at
    :data:`DESCRIPTORS_PER_WORKER` each (plus :data:`LATE_WORKER_EXTRA` for a process),
    and :data:`WORKERS_PER_CPU` per usable CPU (at least :data:`_MIN_WORKER_LIMIT`):
    ``num_workers=10000`` would otherwise spend minutes starting processes before
    failing. The autotuner never grows a pool past it either.
    """
    cpus = available_cpus(proc_root)
    by_cpus = max(_MIN_WORKER_LIMIT, WORKERS_PER_CPU * cpus)
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY or soft < 0:
        soft = None
    # Counted as if started late: a pool the autotuner grows is made of such workers.
    cost = DESCRIPTORS_PER_WORKER["thread"] if worker_type == "thread" else (
        DESCRIPTORS_PER_WORKER["process"] + LATE_WORKER_EXTRA)
    reserve = min(_DESCRIPTOR_RESERVE, (soft or 0) // 4)
    by_files = None if soft is None else max(1, (soft - reserve) // cost)
    if by_files is not None and by_files < by_cpus:
        return by_files, (
            f"each {worker_type} worker holds {cost} file descriptors in the main process, and the "
            f"open-files limit (ulimit -n) of {soft}, less {reserve} kept for the rest of the "
            f"program, has room for {by_files}. Use fewer workers, or raise the limit "
            f"(ulimit -n {max(4096, soft * 2)} in the shell that starts the program)"
        )
    return by_cpus, (
        f"that is {WORKERS_PER_CPU} per usable CPU ({cpus} here), at least {_MIN_WORKER_LIMIT}; "
        "more workers would only queue for the CPUs, each with memory of its own. Use fewer "
        "workers, or num_workers='auto' to have the pool sized while the loader runs"
    )
