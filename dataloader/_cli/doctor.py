"""``python -m dataloader doctor``: what this machine allows for parallel loading.

``doctor --scan DATASET`` instead reads every sample of a dataset once and lists the ones that
fail (:mod:`dataloader._cli.scan`).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import multiprocessing
import os
import platform
from typing import Any, Callable, TypeVar

from .. import _gil, memory
from .._transport.segment import create_fd, map_fd
from . import _limits
from ..argtypes import positive_int, worker_count, writable_log

_MIB = 2**20
_SHM = "/dev/shm"  # a module constant, so that tests can point it elsewhere
_T = TypeVar("_T")


def add_parser(commands: Any) -> None:
    parser = commands.add_parser("doctor", help="check this machine and suggest num_workers and shm_budget")
    parser.add_argument("--batch-bytes", type=positive_int, default=64 * _MIB, help="size of one batch to plan for")
    parser.add_argument(
        "--scan", metavar="DATASET",
        help="instead of checking the machine, read every sample of DATASET once (an ImageFolder "
        "directory, a .parquet file or a directory of them) and list the samples that fail; "
        "exit code 1 if any does",
    )
    parser.add_argument(
        "--workers", type=worker_count, metavar="N",
        help="num_workers of the scan (default: min(4, usable CPU cores)); 0 reads in this process",
    )
    parser.add_argument(
        "--batch-size", type=positive_int, default=64, metavar="N", help="samples per batch of the scan (default 64)"
    )
    parser.add_argument(
        "--error-log", metavar="PATH", type=writable_log,
        help="append each failed sample of the scan to PATH as a JSON line (default: none, "
        "or $DATALOADER_ERROR_LOG)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if getattr(args, "scan", None) is not None:
        from .scan import scan

        workers = min(4, memory.available_cpus()) if args.workers is None else args.workers
        return scan(args.scan, workers, args.batch_size, args.error_log)
    problems: list[str] = []
    warnings: list[str] = []
    cpus = _attempt(memory.available_cpus)
    room = _attempt(memory.memory_room)
    workers = max(1, cpus or os.cpu_count() or 1)
    address = _attempt(_limits.address_space_left)
    rows = [
        ("CPU cores", _row(_describe_cpus)),
        ("memory", _row(_describe_memory)),
        ("cgroup", _row(lambda: _describe_cgroup(memory.cgroup_memory()))),
        ("/dev/shm", _row(_describe_shm, problems)),
        ("shared memory", _probe_segment(args.batch_bytes, problems)),
        ("start method", _row(_describe_start_method)),
        ("GIL", _row(_gil.describe)),
        ("worker start", _probe_process(problems)),
        ("worker threads", _describe_worker_threads()),
        ("open files", _row(_limits.check_open_files, workers, cpus or workers, problems, warnings)),
        ("address space", _row(_limits.describe_address_space, address)),
        ("versions", _versions()),
    ]
    budget, caps = _budget(workers, args.batch_bytes, room, address, problems)
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    print()
    print(
        f"recommended: num_workers={workers} (one per usable core; the main process mostly waits), "
        f"shm_budget={budget} ({budget // _MIB} MiB: 4 batches of {args.batch_bytes // _MIB} MiB in flight "
        f"per worker, {caps})"
    )
    for warning in warnings:
        print(f"WARNING: {warning}")
    for problem in problems:
        print(f"PROBLEM: {problem}")
    print("OK: this machine can run parallel loading." if not problems else "NOT OK: see the problems above.")
    return 1 if problems else 0


def _budget(
    workers: int, batch: int, room: memory.MemoryRoom | None, address: int | None, problems: list[str]
) -> tuple[int, str]:
    """The shm_budget to recommend and what capped it; a problem where memory or the address
    space cannot hold 4 batches per worker and the one being used."""
    budget, caps = max(4 * batch, 64 * _MIB) * workers, []
    need = (workers + 1) * batch * 4
    if room is None:
        caps.append("not capped by memory, which could not be read")
    else:
        budget, caps = min(budget, room.available // 4), ["at most a quarter of available memory"]
        if room.available < need:
            problems.append(
                f"only {room.available / _MIB:,.0f} MiB of memory available for batches of "
                f"{batch / _MIB:,.0f} MiB; use smaller batches or fewer workers"
            )
    if address is not None:
        budget = min(budget, address // 2)
        caps.append("and at most half the address space ulimit -v leaves")
        if address < need:
            problems.append(
                f"the address-space limit (ulimit -v) leaves {address / _MIB:,.0f} MiB to map "
                f"{workers + 1} x 4 batches of {batch / _MIB:,.0f} MiB; raise it (ulimit -v unlimited) "
                "or use smaller batches or fewer workers"
            )
    return budget, " ".join(caps)


def _attempt(read: Callable[[], _T]) -> _T | None:
    """What ``read`` returns, or None where it fails (no /proc, say)."""
    try:
        return read()
    except Exception:
        return None


def _row(describe: Callable[..., str], *args: Any) -> str:
    """A row's text; ``unknown (why)`` where it cannot be found out, so one failed check
    (a container without /proc, say) does not stop the others."""
    try:
        return describe(*args)
    except Exception as error:
        reason = str(error).splitlines()[0] if str(error) else ""
        return f"unknown ({type(error).__name__}: {reason})" if reason else f"unknown ({type(error).__name__})"


def _describe_cpus() -> str:
    cpus, quota = memory.available_cpus(), memory.cpu_quota()
    return f"{os.cpu_count()} online, {cpus} usable" + (f" (cgroup quota {quota:g})" if quota else "")


def _describe_memory() -> str:
    room = memory.memory_room()
    return f"{room.available / _MIB:,.0f} MiB available of {room.total / _MIB:,.0f} MiB ({room.source})"


def _describe_shm(problems: list[str]) -> str:
    """Room in /dev/shm; a problem where something other than a directory is there."""
    if os.path.lexists(_SHM) and not os.path.isdir(_SHM):
        problems.append(
            f"{_SHM} is not a directory, so POSIX shared memory (shm_open, and the semaphores of "
            f"multiprocessing) cannot work; mount a tmpfs there (a container runtime does, unless "
            f"a file is mounted over it)"
        )
        return "not a directory: shared memory cannot work"
    shm = memory.shm_room(_SHM)
    return "missing" if shm is None else f"{shm.free / _MIB:,.0f} MiB free of {shm.total / _MIB:,.0f} MiB"


def _describe_start_method() -> str:
    methods = ", ".join(multiprocessing.get_all_start_methods())
    return f"{multiprocessing.get_start_method()} (available: {methods})"


def _describe_cgroup(cgroup: memory.CgroupMemory) -> str:
    if cgroup.version is None:
        return "none found"
    limit = "no limit" if cgroup.limit is None else f"limit {cgroup.limit / _MIB:,.0f} MiB"
    usage = "" if cgroup.usage is None else f", using {cgroup.usage / _MIB:,.0f} MiB"
    return f"v{cgroup.version} {cgroup.path}: {limit}{usage}"


def _probe_segment(size: int, problems: list[str]) -> str:
    kind = "memfd (not limited by /dev/shm)" if hasattr(os, "memfd_create") else "/dev/shm files"
    try:
        fd = create_fd(size, "dataloader-doctor")
        try:
            mapping = map_fd(fd, size)
            mapping[0:1] = b"\1"
            mapping.close()
        finally:
            os.close(fd)
    except Exception as error:
        problems.append(f"cannot create a {size / _MIB:,.0f} MiB shared segment: {error}")
        return f"{kind}: FAILED"
    if not hasattr(os, "memfd_create"):
        try:
            memory.check_shm(size, _SHM)
        except Exception as error:
            problems.append(str(error))
    return f"{kind}: a {size / _MIB:,.0f} MiB segment works"


def _probe_process(problems: list[str]) -> str:
    try:
        process = multiprocessing.get_context().Process(target=_noop)
        process.start()
        process.join(30)
        if process.exitcode != 0:
            raise RuntimeError(f"exit code {process.exitcode}")
    except Exception as error:
        problems.append(f"cannot start a worker process: {error}")
        return "FAILED"
    return "ok"


def _describe_worker_threads() -> str:
    """Which native thread pools a process worker caps at one thread (see _workers/native_threads)."""
    if importlib.util.find_spec("threadpoolctl") is None:
        return (
            "torch and OpenCV (where loaded) capped at 1 thread per worker; BLAS and OpenMP not, for want of "
            "threadpoolctl (pip install threadpoolctl): a NumPy matmul in a transform would run "
            "a pool of every core in each worker"
        )
    return "torch, OpenCV (where loaded), BLAS and OpenMP capped at 1 thread per worker"


def _noop() -> None:
    return None


def _versions() -> str:
    parts = [f"Python {platform.python_version()}"]
    for name in ("numpy", "pyarrow", "psutil", "threadpoolctl", "torch", "megengine"):
        try:
            parts.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            parts.append(f"{name} -")
    return ", ".join(parts)
