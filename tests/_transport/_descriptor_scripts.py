"""Child scripts for the descriptor tests: a loader under a low ``RLIMIT_NOFILE``.

A script runs as ``python -c "...run()" SCENARIO ARG`` from the repository root
(:func:`run_script`), lowers its own descriptor limit, and prints one JSON line:
what it saw. The limit is never lowered in the test process itself.
"""

from __future__ import annotations

import os
import resource
from typing import Any

import numpy as np

from dataloader import DataLoader, Dataset, SequentialSampler
from tests import _scenarios as scenarios

LIMIT = 256
HELD = 400  # batches held at once: more than LIMIT
SAMPLE_BYTES = 40_000  # two samples a batch: 80 KB, past the inline limit, so each takes a segment


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd")) - 1  # less the one listdir itself opens


class Tagged(Dataset):
    """Sample ``i``: ``SAMPLE_BYTES`` bytes of ``i % 251``, then ``i`` and the loading process's
    open-descriptor count (int32, little-endian; -1 without ``count``) in its last 8 bytes."""

    def __init__(self, n: int, count: bool = True) -> None:
        self.n = n
        self.count = count

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> np.ndarray:
        sample = np.full(SAMPLE_BYTES, index % 251, np.uint8)
        tag = np.array([index, open_descriptors() if self.count else -1], "<i4")
        sample[-8:] = np.frombuffer(tag.tobytes(), np.uint8)
        return sample


def check_sample(sample: np.ndarray, index: int) -> int:
    """Fail unless ``sample`` is sample ``index``; return the loading process's descriptor count."""
    tag = np.frombuffer(sample[-8:].tobytes(), "<i4")
    assert int(tag[0]) == index, f"sample {index} holds sample {int(tag[0])}"
    assert (sample[:-8] == index % 251).all(), f"sample {index} was overwritten"
    return int(tag[1])


def _hold_many(workers: str) -> dict:
    """Hold ``HELD`` batches at once under a limit of ``LIMIT`` descriptors, checking each."""
    resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, LIMIT))
    dataset = Tagged(2 * HELD)
    loader = DataLoader(dataset, SequentialSampler(dataset, batch_size=2), num_workers=int(workers),
                        worker_type="process")  # the shared-memory transport: processes on 3.14t too
    before = open_descriptors()
    held, most = [], 0
    for batch in loader:
        held.append(batch)
        most = max(most, open_descriptors())
    worker_most = 0
    for number, batch in enumerate(held):  # every batch still holds what it was made with
        for row in range(2):
            worker_most = max(worker_most, check_sample(batch[row], 2 * number + row))
    return {"batches": len(held), "before": before, "most": most, "worker_most": worker_most}


def _main_runs_out(workers: str) -> dict:
    """Use up the main process's descriptors mid-epoch, while the workers need new segments."""
    resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, LIMIT))
    dataset = Tagged(2 * HELD)
    loader = DataLoader(dataset, SequentialSampler(dataset, batch_size=2), num_workers=int(workers),
                        worker_type="process")  # the shared-memory transport: processes on 3.14t too
    held, fillers = [], []
    try:
        for batch in loader:
            held.append(batch)
            if len(held) == 8:
                while True:
                    try:
                        fillers.append(os.open(os.devnull, os.O_RDONLY))
                    except OSError:
                        break
    except Exception as error:  # noqa: BLE001 - the script reports whatever was raised
        for fd in fillers:
            os.close(fd)
        mro = [kind.__name__ for kind in type(error).__mro__]
        return {"error": type(error).__name__, "mro": mro, "message": str(error), "held": len(held)}
    return {"error": None, "held": len(held)}


SCRIPTS = {"hold-many": _hold_many, "main-runs-out": _main_runs_out}


def run_script() -> None:
    scenarios.main(SCRIPTS)


def run(scenario: str, arg: Any, timeout: float = 120) -> tuple[dict, str]:
    """Run a scenario in a fresh interpreter; its JSON line and its stderr."""
    return scenarios.run(__name__, scenario, arg, timeout=timeout)


def exhaust_descriptors(worker_id: int) -> None:
    """worker_init_fn: leave the worker no free descriptor (a dataset with too many files open)."""
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    while True:
        try:
            os.open(os.devnull, os.O_RDONLY)
        except OSError:
            return
