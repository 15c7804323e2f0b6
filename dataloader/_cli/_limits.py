"""The per-process limits parallel loading runs into, for ``doctor``: open files (``ulimit -n``)
and address space (``ulimit -v``).

A loader's main process holds a few descriptors for its pool and a few per worker, as the pool
counts them before it starts (:mod:`dataloader._workers.descriptors`); a training job opens files
of its own besides. Every shared segment is mapped in the main process, so under ``ulimit -v``
the shared-memory budget must fit in the address space the process has left.
"""

from __future__ import annotations

import multiprocessing
import resource

import psutil

from .._workers import descriptors

# Room for the job's own files (datasets, logs, checkpoints, sockets) besides the loader's.
NOFILE_FLOOR = 256
_MIB = 2**20


def descriptors_needed(workers: int) -> int:
    """Descriptors a loader with ``workers`` workers (the default start method) needs in the main
    process, this process's own open ones added."""
    method = multiprocessing.get_context().get_start_method()
    return (descriptors.open_descriptors() or 3) + descriptors.needed(workers, method)


def recommended_nofile(cpus: int) -> int:
    """The soft limit to ask for: what 2 workers per CPU need, at least :data:`NOFILE_FLOOR`."""
    return max(NOFILE_FLOOR, descriptors_needed(2 * cpus))


def check_open_files(workers: int, cpus: int, problems: list[str], warnings: list[str]) -> str:
    """The ``open files`` row; a problem when ``workers`` workers would run out of descriptors,
    a warning when the limit is below :func:`recommended_nofile`."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need, want = descriptors_needed(workers), recommended_nofile(cpus)
    row = f"soft limit {_count(soft)}, hard {_count(hard)} (ulimit -n); {workers} worker(s) need about {need}"
    if _below(soft, need):
        problems.append(
            f"the open-files limit (ulimit -n) is {soft}, and a loader with {workers} worker(s) "
            f"needs about {need} descriptors in the main process; {_raise_nofile(want, hard)}"
        )
    elif _below(soft, want):
        warnings.append(
            f"the open-files limit (ulimit -n) is {soft}: enough for {workers} worker(s), but little "
            f"room for the job's own files or for 2 workers per CPU; {_raise_nofile(want, hard)}"
        )
    return row


def _raise_nofile(want: int, hard: int) -> str:
    if not _below(hard, want):
        return (f"raise it to {want} or more: ulimit -n {want} in the shell that starts the job, or "
                f"resource.setrlimit(resource.RLIMIT_NOFILE, ({want}, hard)) in the program")
    return (f"raise it to {want} or more; the hard limit is {hard}, so that needs root (ulimit -Hn, "
            "/etc/security/limits.conf, or docker run --ulimit nofile=...)")


def address_space_left() -> int | None:
    """Bytes of address space this process may still map under ``ulimit -v``; None when unlimited."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    return max(0, soft - _mapped_now())


def _mapped_now() -> int:
    try:
        return int(psutil.Process().memory_info().vms)
    except (psutil.Error, OSError):
        return 0  # unknown: count the whole limit as left


def describe_address_space(left: int | None) -> str:
    """The ``address space`` row."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if left is None:
        return "unlimited (ulimit -v)"
    return (f"limited to {soft / _MIB:,.0f} MiB (ulimit -v {soft // 1024}), {left / _MIB:,.0f} MiB "
            "of it left; shared segments are mapped in the main process")


def _below(limit: int, value: int) -> bool:
    return limit != resource.RLIM_INFINITY and limit < value


def _count(limit: int) -> str:
    return "unlimited" if limit == resource.RLIM_INFINITY else str(limit)
