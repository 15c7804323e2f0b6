"""Worker counts and the open-files limit: a typed error up front, never a hang or a raw OSError.

``num_workers=10000`` printed a memory warning and then spent minutes starting processes; under
``ulimit -n 16`` two workers died in ``os.pipe`` with ``OSError: [Errno 24] Too many open
files``. Now the count is refused at construction above :func:`max_workers` (what the
open-files limit has room for, and 32 per usable CPU with a floor of 64), and a pool that does
not fit under the limit is a :class:`ResourceLimitError` naming the limit, the need and the fix,
with nothing left behind.
"""

from __future__ import annotations

import os
import resource
import types

import numpy as np
import pytest

from dataloader import ArgumentValueError, ArrayDataset, DataLoader, SequentialSampler
from dataloader import memory
from dataloader.memory import DESCRIPTORS_PER_WORKER, LATE_WORKER_EXTRA, max_workers
from dataloader._tune.tuner import Autotuner
from dataloader._workers import descriptors
from dataloader.memory import available_cpus

from ._limit_scripts import run


def _dataset(n: int = 64) -> ArrayDataset:
    return ArrayDataset(np.arange(n * 4, dtype=np.float32).reshape(n, 4))


def _open_files_limit(monkeypatch: pytest.MonkeyPatch, soft: int) -> None:
    """``ulimit -n soft`` as the worker limit reads it (the process's own limit is untouched)."""
    fake = types.SimpleNamespace(
        getrlimit=lambda which: (soft, resource.RLIM_INFINITY),
        RLIMIT_NOFILE=resource.RLIMIT_NOFILE,
        RLIM_INFINITY=resource.RLIM_INFINITY,
    )
    monkeypatch.setattr(memory, "resource", fake)


# -- the limit on num_workers ------------------------------------------------------------------


@pytest.mark.parametrize("worker_type", ["process", "thread"])
def test_an_absurd_worker_count_is_refused_with_the_limit_and_why(worker_type):
    limit, why = max_workers(worker_type)
    with pytest.raises(ArgumentValueError, match=rf"`num_workers` must be at most {limit} here; got 10000: ") as info:
        DataLoader(_dataset(), num_workers=10000, worker_type=worker_type)
    assert why in str(info.value)
    DataLoader(_dataset(), num_workers=limit, worker_type=worker_type)  # the limit itself is allowed


def test_without_an_open_files_limit_it_is_32_workers_per_cpu_at_least_64(monkeypatch):
    _open_files_limit(monkeypatch, resource.RLIM_INFINITY)
    limit, why = max_workers()
    assert limit == max(64, 32 * available_cpus())
    assert "per usable CPU" in why and "num_workers='auto'" in why


@pytest.mark.parametrize("worker_type", ["process", "thread"])
def test_under_a_low_open_files_limit_it_is_what_the_descriptors_allow(monkeypatch, worker_type):
    _open_files_limit(monkeypatch, 256)
    limit, why = max_workers(worker_type)
    cost = DESCRIPTORS_PER_WORKER[worker_type] + (LATE_WORKER_EXTRA if worker_type == "process" else 0)
    assert limit == (256 - 64) // cost  # 64 kept for the program
    assert "ulimit -n" in why and "256" in why and "fewer workers" in why
    with pytest.raises(ArgumentValueError, match="open-files limit"):
        DataLoader(_dataset(), num_workers=limit + 1, worker_type=worker_type)


def test_one_worker_is_never_refused(monkeypatch):
    _open_files_limit(monkeypatch, 8)
    assert max_workers()[0] == 1
    DataLoader(_dataset(), num_workers=1)


def test_the_autotuner_never_grows_past_the_limit(monkeypatch):
    _open_files_limit(monkeypatch, 8)  # room for 1 worker; 2 per CPU would be at least 2
    assert Autotuner(workers=True, depth=True).limits.max_workers == 1
    assert Autotuner(workers=True, depth=True, threads=True).limits.max_workers == 1


# -- what a worker costs in descriptors --------------------------------------------------------


def _open_while_iterating(workers: int, worker_type: str) -> int:
    dataset = _dataset()
    loader = DataLoader(
        dataset, SequentialSampler(dataset, batch_size=4), num_workers=workers, worker_type=worker_type,
        **({} if worker_type == "thread" else {"multiprocessing_context": "fork"}),
    )
    most = 0
    for _ in loader:
        most = max(most, len(os.listdir("/proc/self/fd")))
    return most


@pytest.mark.parametrize("worker_type", ["process", "thread"])
def test_each_worker_costs_the_main_process_what_the_limits_count(no_leaks, worker_type):
    extra = (_open_while_iterating(4, worker_type) - _open_while_iterating(1, worker_type)) / 3
    method = "thread" if worker_type == "thread" else "fork"
    assert extra == descriptors.needed(1, method) - descriptors.needed(0, method)  # 4; a thread 6
    assert extra <= DESCRIPTORS_PER_WORKER[worker_type]


# -- a pool that does not fit under ulimit -n (child scripts) ----------------------------------


@pytest.mark.parametrize("counted", ["yes", "no"], ids=["counted-first", "met-while-starting"])
@pytest.mark.parametrize("kind", ["fork", "thread"])
def test_too_few_descriptors_for_the_pool_is_a_typed_error_and_leaves_nothing(no_leaks, kind, counted):
    seen = run("start", kind, 2, 16, counted)
    assert seen["error"] == "ResourceLimitError", seen
    assert {"DataLoaderError", "OSError"} <= set(seen["mro"]), seen
    message = seen["message"]
    assert f"starting 2 {'thread' if kind == 'thread' else 'process'} worker(s) needs about" in message
    assert "the 16 that the open-files limit allows (ulimit -n, RLIMIT_NOFILE)" in message
    assert "ulimit -n 4096" in message and "use fewer workers" in message
    assert seen["leaks"] is None, seen["leaks"]


@pytest.mark.parametrize("kind", ["fork", "thread"])
def test_a_limit_with_just_the_room_counted_runs_the_pool(no_leaks, kind):
    seen = run("start", kind, 2, "exact", "yes")
    assert seen == {"error": None, "batches": 16, "leaks": None}, seen
