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
from typing import Any

from .. import memory
from .._transport.segment import create_fd, map_fd

_MIB = 2**20


def add_parser(commands: Any) -> None:
    parser = commands.add_parser("doctor", help="check this machine and suggest num_workers and shm_budget")
    parser.add_argument("--batch-bytes", type=int, default=64 * _MIB, help="size of one batch to plan for")
    parser.add_argument(
        "--scan", metavar="DATASET",
        help="instead of checking the machine, read every sample of DATASET once (an ImageFolder "
        "directory, a .parquet file or a directory of them) and list the samples that fail; "
        "exit code 1 if any does",
    )
    parser.add_argument(
        "--workers", type=_workers, metavar="N",
        help="num_workers of the scan (default: min(4, usable CPU cores)); 0 reads in this process",
    )
    parser.add_argument(
        "--batch-size", type=_positive, default=64, metavar="N", help="samples per batch of the scan (default 64)"
    )
    parser.add_argument(
        "--error-log", metavar="PATH",
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
    cpus = memory.available_cpus()
    quota = memory.cpu_quota()
    cgroup = memory.cgroup_memory()
    room = memory.memory_room()
    shm = memory.shm_room()
    rows = [
        ("CPU cores", f"{os.cpu_count()} online, {cpus} usable" + (f" (cgroup quota {quota:g})" if quota else "")),
        ("memory", f"{room.available / _MIB:,.0f} MiB available of {room.total / _MIB:,.0f} MiB ({room.source})"),
        ("cgroup", _describe_cgroup(cgroup)),
        ("/dev/shm", "missing" if shm is None else f"{shm.free / _MIB:,.0f} MiB free of {shm.total / _MIB:,.0f} MiB"),
        ("shared memory", _probe_segment(args.batch_bytes, problems)),
        ("start method", f"{multiprocessing.get_start_method()} (available: {', '.join(multiprocessing.get_all_start_methods())})"),
        ("worker start", _probe_process(problems)),
        ("worker threads", _describe_worker_threads()),
        ("versions", _versions()),
    ]
    workers = max(1, cpus)
    budget = min(room.available // 4, max(4 * args.batch_bytes, 64 * _MIB) * workers)
    if room.available < (workers + 1) * args.batch_bytes * 4:
        problems.append(
            f"only {room.available / _MIB:,.0f} MiB of memory available for batches of "
            f"{args.batch_bytes / _MIB:,.0f} MiB; use smaller batches or fewer workers"
        )
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    print()
    print(
        f"recommended: num_workers={workers} (one per usable core; the main process mostly waits), "
        f"shm_budget={budget} ({budget // _MIB} MiB: 4 batches of {args.batch_bytes // _MIB} MiB in flight per worker, "
        "at most a quarter of available memory)"
    )
    for problem in problems:
        print(f"PROBLEM: {problem}")
    print("OK: this machine can run parallel loading." if not problems else "NOT OK: see the problems above.")
    return 1 if problems else 0


def _workers(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"must be an integer >= 0; got {text!r}")
    return int(text)


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer; got {text!r}")
    return int(text)


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
            memory.check_shm(size)
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
