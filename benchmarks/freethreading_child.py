"""One run of the free-threading bench, in the interpreter it measures.

:func:`main`, called with one JSON argument in a fresh interpreter (:data:`COMMAND`, with
``PYTHONPATH`` at the checkout), builds one workload (``freethreading_workloads.py``), runs
our loader on it with the ``worker_type`` and ``num_workers`` given, and prints one line of
JSON: samples/s over ``seconds`` after ``warmup`` counted from the first batch
(``autotune_measure.measure_loader``; process workers take seconds to start under
forkserver), the time to that first batch, the peak PSS and RSS of this process and its
workers (``measure.TreeMemorySampler``), the CPUs' worth of time other processes used
meanwhile, and what the interpreter was: its version, whether it is a free-threaded build and
whether the GIL was on at the end (an extension module can turn it on when imported). The
parent (``freethreading.py``) starts one of these per run.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import sysconfig
from typing import Any, Sequence

import dataloader
from dataloader import RandomSampler

from .autotune_measure import measure_loader
from .batches import touch
from .freethreading_workloads import WORKLOADS
from .measure import TreeMemorySampler

#: ``python -c COMMAND '<json>'`` runs one run (the module is no bench of its own to run).
COMMAND = "import sys; from benchmarks.freethreading_child import main; sys.exit(main())"


def gil_enabled() -> bool:
    """Whether the GIL is on now (always, on a build that has one)."""
    is_enabled = getattr(sys, "_is_gil_enabled", None)
    return True if is_enabled is None else bool(is_enabled())


def interpreter() -> dict[str, Any]:
    """What this interpreter is: version, free-threaded build, GIL now, the library's path."""
    return {
        "python": sys.version.split()[0], "executable": sys.executable,
        "free_threaded": bool(sysconfig.get_config_var("Py_GIL_DISABLED")),
        "gil_enabled": gil_enabled(), "library": os.path.dirname(dataloader.__file__),
    }


def run(workload: str, worker_type: str, num_workers: int, warmup: float, seconds: float,
        small: bool, start_method: str | None) -> dict[str, Any]:
    """One measured run of ``workload``; what it gave and what this interpreter is."""
    chosen = WORKLOADS[workload]
    dataset = chosen.make(small)
    options: dict[str, Any] = {
        "dataset": dataset, "sampler": RandomSampler(dataset, batch_size=chosen.batch_size, seed=0),
        "transform": chosen.transform(), "num_workers": num_workers, "worker_type": worker_type,
    }
    if start_method is not None and worker_type == "process":
        options["multiprocessing_context"] = start_method
    if worker_type == "process":
        _start_helpers(start_method or multiprocessing.get_start_method())
    with TreeMemorySampler() as sampler:
        got = measure_loader(options, touch, warmup, seconds, sampler, chosen.batch_size,
                             warmup_from_first=True)
    mib = 2.0**20
    method = start_method or multiprocessing.get_start_method()  # Python's default otherwise
    return {
        "rate": got.rate, "peak_pss_mib": got.peak_pss / mib, "peak_rss_mib": got.peak_rss / mib,
        "batches": got.batches, "epochs": got.epochs, "first_batch_s": got.first_batch_s,
        "others_cpus": got.others_cpus, "leftover_processes": got.leftover_processes,
        "start_method": method if worker_type == "process" else None, **interpreter(),
    }


def _start_helpers(method: str) -> None:
    """Start the processes multiprocessing keeps for a program's lifetime (the resource tracker;
    under forkserver, the fork server) before the run, as a long training program has them: the
    run then counts their memory but not their start, and the workers it leaves behind are
    told apart from them (``measure_loader`` waits 5 s for every new child to exit)."""
    import multiprocessing.forkserver
    import multiprocessing.resource_tracker

    multiprocessing.resource_tracker.ensure_running()
    if method == "forkserver":
        multiprocessing.forkserver.ensure_running()


def main(argv: Sequence[str] | None = None) -> int:
    """Read the run's JSON argument, measure, print the result as the last line of stdout."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) != 1:
        print("usage: python -c COMMAND '<json>' (benchmarks.freethreading_child.COMMAND; "
              "python -m benchmarks.freethreading starts it)", file=sys.stderr)
        return 2
    print(json.dumps(run(**json.loads(argv[0]))), flush=True)
    return 0

