"""Child scripts for the address-space tests: a loader under a low ``RLIMIT_AS`` (ulimit -v).

A script runs as ``python -c "...run_script()" SCENARIO ARG`` from the repository root (see
:func:`run`), lowers its own limit, and prints one JSON line: what it saw. The limit is never
lowered in the test process itself.
"""

from __future__ import annotations

import errno
import os
import resource
from typing import Any

import numpy as np

from dataloader import Collator, DataLoader, Dataset, SequentialSampler
from dataloader._transport import arena
from tests import _scenarios as scenarios

MiB = 2**20
BATCH = 64 * MiB  # one sample, one batch: its segment (1.25 x) cannot be mapped under the limit


class Preallocated(Dataset):
    """``n`` samples of ``BATCH`` bytes, all one array made before the limit is set: reading a
    sample takes no memory, so the only allocations a batch makes are the transport's."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.data = np.full(BATCH, 7, np.uint8)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> np.ndarray:
        return self.data


class First(Collator):
    """A batch of one sample is that sample (no copy: the batch costs no memory either)."""

    def apply(self, samples: list) -> Any:
        return samples[0]


def _virtual_size() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmSize in /proc/self/status")


def _loader(worker_init_fn: Any = None) -> DataLoader:
    dataset = Preallocated(3)
    return DataLoader(
        dataset, SequentialSampler(dataset, batch_size=1), collator=First(), num_workers=1,
        multiprocessing_context="fork", worker_init_fn=worker_init_fn, timeout=60,
    )


def _iterate(loader: DataLoader) -> dict:
    batches = 0
    try:
        for batch in loader:
            assert batch.nbytes == BATCH and int(batch[0]) == int(batch[-1]) == 7
            batches += 1
    except Exception as error:  # noqa: BLE001 - the script reports whatever was raised
        mro = [kind.__name__ for kind in type(error).__mro__]
        return {"error": type(error).__name__, "mro": mro, "message": str(error), "batches": batches}
    return {"error": None, "batches": batches}


def _limited(share: str) -> dict:
    """The whole process (and so its workers) under ``RLIMIT_AS``: its size now plus ``share``
    of a batch, less than the batch's segment and than a copy of the batch (no fall-back fits)."""
    loader = _loader()
    limit = _virtual_size() + int(float(share) * BATCH)
    resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))
    return _iterate(loader)


def _cannot_map(worker_id: int) -> None:
    """worker_init_fn: no segment can be mapped in this worker, as under a tight ulimit -v."""

    def refuse(fd: int, size: int) -> memoryview:
        raise OSError(errno.ENOMEM, os.strerror(errno.ENOMEM))

    arena.map_shared = refuse


def _unmappable(_: str) -> dict:
    """Segments cannot be mapped, but memory for a copy is there: every batch takes the pipe."""
    return _iterate(_loader(_cannot_map))


SCRIPTS = {"limited": _limited, "unmappable": _unmappable}


def run_script() -> None:
    scenarios.main(SCRIPTS)


def run(scenario: str, arg: Any, timeout: float = 120) -> tuple[dict, str]:
    """Run a scenario in a fresh interpreter; its JSON line and its stderr."""
    # MALLOC_ARENA_MAX: no 64 MiB arena reserved per thread under the address-space limit.
    return scenarios.run(__name__, scenario, arg, timeout=timeout, env={"MALLOC_ARENA_MAX": "1"})
