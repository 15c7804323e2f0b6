"""Child scripts for the resource-limit tests: a loader under a low ``RLIMIT_NOFILE``.

A script runs as ``python -c "...run_script()" SCENARIO ARGS...`` from the repository root (see
:func:`run`), lowers its own limit before it builds the loader, and prints one JSON line: what
it saw, and what it left behind. The limit is never lowered in the test process itself.
"""

from __future__ import annotations

import gc
import resource
from typing import Any

import numpy as np

from dataloader import ArrayDataset, DataLoader, SequentialSampler
from dataloader._exec import pool_start
from dataloader._workers import descriptors
from tests.harness import LeakCheck
from tests import _scenarios as scenarios


def _start(kind: str, workers: str, limit: str, counted: str) -> dict:
    """Iterate a loader of ``workers`` workers of ``kind`` ("fork" or "thread") under ``ulimit -n
    limit`` ("exact": the open descriptors and what the pool is counted to need); ``counted``
    "no": skip the count before the start, to meet the shortage itself."""
    if counted == "no":
        pool_start.check_room = lambda count, method: None
    if limit == "exact":
        in_use = descriptors.open_descriptors()
        assert in_use is not None
        limit = str(in_use + descriptors.needed(int(workers), kind))
    resource.setrlimit(resource.RLIMIT_NOFILE, (int(limit), resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    dataset = ArrayDataset(np.arange(64 * 4, dtype=np.float32).reshape(64, 4))
    options: dict[str, Any] = {"worker_type": "thread"} if kind == "thread" else {"multiprocessing_context": kind}
    loader = DataLoader(dataset, SequentialSampler(dataset, batch_size=4), num_workers=int(workers), **options)
    check = LeakCheck()
    seen: dict[str, Any] = {"error": None, "batches": 0}
    try:
        seen["batches"] = sum(1 for _ in loader)
    except Exception as error:  # noqa: BLE001 - the script reports whatever was raised
        seen.update(error=type(error).__name__, mro=[k.__name__ for k in type(error).__mro__], message=str(error))
    gc.collect()
    try:
        check.check()
        seen["leaks"] = None
    except AssertionError as leak:
        seen["leaks"] = str(leak)
    return seen


SCRIPTS = {"start": _start}


def run_script() -> None:
    scenarios.main(SCRIPTS)


def run(scenario: str, *args: Any, timeout: float = 120) -> dict:
    """Run a scenario in a fresh interpreter; the JSON line it printed (it must exit cleanly)."""
    result, stderr = scenarios.run(__name__, scenario, *args, timeout=timeout)
    assert "Traceback" not in stderr, stderr[-5000:]
    return result
