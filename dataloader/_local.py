"""Per-thread state the loader installs while it works: the batch generator and the worker info.

A foundation module: it imports nothing from the package. The worker loop and
:class:`~dataloader._stages.batch.BatchMaker` write this state through the functions below;
the public modules read it (:func:`dataloader.rng.batch_rng`,
:func:`dataloader.worker.get_worker_info`), so neither side imports the other's private names.
Everything is per thread, so thread workers never see each other's state, except whether
this whole process is a worker process (:func:`in_worker_process`).
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Iterator

import numpy as np

_state = threading.local()
_worker_process = False  # this process is one the loader started as a worker (set at its start)


def current_batch_rng() -> np.random.Generator | None:
    """The generator installed for the batch this thread is making, or None outside one."""
    rng = getattr(_state, "rng", None)
    if isinstance(rng, int):  # seeded lazily: most transforms never ask
        rng = _state.rng = np.random.default_rng(rng)
    return rng


def install_batch_rng(rng: np.random.Generator | int | None) -> Any:
    """Make ``rng`` (or a generator seeded with it) this thread's batch generator; the one it
    replaces, to install again after (a ``with`` block's cost, saved per batch)."""
    previous = getattr(_state, "rng", None)
    _state.rng = rng
    return previous


@contextmanager
def using_batch_rng(rng: np.random.Generator | int) -> Iterator[None]:
    """Make ``rng`` (or a generator seeded with it) this thread's batch generator in the block."""
    previous = install_batch_rng(rng)
    try:
        yield
    finally:
        install_batch_rng(previous)


def current_worker_info() -> Any:
    """The calling thread's :class:`~dataloader.worker.WorkerInfo`, or None in the main process.

    Typed ``Any``: this module sits below ``worker.py`` and does not import it."""
    return getattr(_state, "info", None)


def set_worker_info(info: Any) -> None:
    """Install ``info`` for the calling thread (the worker loop does, when a worker starts)."""
    _state.info = info


def mark_worker_process() -> None:
    """Note that this process is a loader's worker process (the worker loop does, first thing)."""
    global _worker_process
    _worker_process = True


def in_worker_process() -> bool:
    """Whether this process is a loader's worker process: a crash here is a worker's death,
    which the main process reports (a thread worker is in the main process: False)."""
    return _worker_process


def in_thread_worker() -> bool:
    """Whether the calling thread is a loader's thread worker (``worker_type="thread"``), which
    shares the objects it reads with the other worker threads of its loader."""
    return not _worker_process and getattr(_state, "info", None) is not None
