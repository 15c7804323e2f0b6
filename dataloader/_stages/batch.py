"""Fetch -> transform -> collate for one :class:`BatchTask`.

The same :class:`BatchMaker` runs in the main process (serial) and inside
workers (parallel); parallel mode only moves it, which is what makes
"parallel output == serial output" a real test.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from time import perf_counter
from typing import Any, Callable, NamedTuple

import numpy as np

from .._local import using_batch_rng
from ..collator import Collator
from ..dataset import Collated, read_samples
from ..errors import ArgumentValueError
from ..transform import PseudoTransform
from .seeding import batch_seed, seed_all, seeded_then_restored
from .task import BatchTask, Chunk


class StageTimes(NamedTuple):
    """``perf_counter`` times (a system-wide clock on Linux, so comparable across processes)."""

    start: float
    fetched: float
    transformed: float
    collated: float
    samples: int


# StageTimes((start, fetched, ...)) without NamedTuple's Python-level __new__: a quarter of
# the time, and one is made per batch.
_stage_times: Callable[[tuple], StageTimes] = functools.partial(tuple.__new__, StageTimes)


def fetch(dataset: Any, indices: Any) -> list[Any] | Collated:
    """Read the samples at ``indices``; datasets with ``__getitems__`` read in one call,
    which may return the whole batch already collated (:class:`~dataloader.Collated`).
    An int64 array comes from one of our samplers (never negative): it is only made a list."""
    if type(indices) is np.ndarray:
        indices = indices.tolist()
    else:
        _check_not_negative(indices)
    return read_samples(dataset, indices)


def _check_not_negative(indices: list) -> None:
    """Refuse a negative index: a list or an array would silently read from its end. One
    ``min()`` per batch; indices that are not numbers (the keys of a dict) are not checked."""
    try:
        lowest = min(indices, default=0)
        negative = bool(lowest < 0)
    except (TypeError, ValueError):  # not numbers, or arrays
        return
    if negative:
        raise ArgumentValueError(
            f"the sampler gave the negative index {lowest} (in {_brief(indices)}); indices must "
            "be >= 0, or a list-backed dataset silently reads from its end. Fix the sampler."
        )


def _brief(indices: list, shown: int = 8) -> str:
    head = ", ".join(str(i) for i in indices[:shown])
    return f"[{head}]" if len(indices) <= shown else f"[{head}, ... ({len(indices)} in all)]"


def _transform(transform: Any, samples: list) -> list:
    """``apply_batch`` where the transform has one, else ``apply`` on each sample."""
    apply_batch = getattr(transform, "apply_batch", None)
    if apply_batch is not None:
        return apply_batch(samples)
    return [transform.apply(sample) for sample in samples]


def _read(dataset: Any, task: BatchTask) -> list | Collated:
    if task.samples is not None:
        # A stream that yields whole batches: each task carries one Collated.
        if len(task.samples) == 1 and isinstance(task.samples[0], Collated):
            return task.samples[0]
        return task.samples
    if task.jobs is not None:
        return [job() for job in task.jobs]
    return fetch(dataset, task.indices)


@dataclass
class BatchMaker:
    """Makes batches for one loader: the middle of the pipeline.

    ``seed`` None leaves random state alone. ``restore_random_state`` is set
    in the main process so the user's random streams are left as they were.
    """

    dataset: Any
    transform: Any
    collator: Any
    seed: int | None = None
    restore_random_state: bool = False
    # False in thread workers: global random state is shared by every thread.
    seed_globals: bool = True
    # The stage running now, named in a worker's error message. Read it from outside; only
    # the maker writes it (mark_stage names the stages around a batch).
    stage: str = "fetch"
    # When the stages of the last batch began and ended (for the monitor); read-only outside.
    timings: "StageTimes | None" = None

    def __post_init__(self) -> None:
        # A batch the dataset collated itself is handed out as it is only when nothing would
        # have changed it: no per-sample transform and the default collator.
        self._identity = type(self.transform) is PseudoTransform  # no transform stage to run
        self._takes_collated = self._identity and type(self.collator) is Collator

    def __call__(self, task: BatchTask) -> Any:
        if self.seed is None:
            return self._make(task)
        seed = batch_seed(self.seed, task.epoch, task.index)
        with using_batch_rng(seed):
            if not self.seed_globals:
                return self._make(task)
            if self.restore_random_state:
                with seeded_then_restored(seed):
                    return self._make(task)
            seed_all(seed)
            return self._make(task)

    def make_read(self, task: BatchTask, samples: list, started: float) -> Any:
        """``task``'s batch from ``samples`` read elsewhere (a worker's own stream shard) since
        ``started``, a ``perf_counter`` time: the reading counts as the fetch stage."""
        batch = self(BatchTask(task.epoch, task.index, samples=samples))
        self.timings = self.timings._replace(start=started)
        return batch

    def mark_stage(self, stage: str) -> None:
        """Name the stage running now outside of making a batch, for error messages: ``"fetch"``
        while a worker reads samples for :meth:`make_read`, ``"transport"`` after a batch is made."""
        self.stage = stage

    def _make(self, task: BatchTask) -> Any:
        start = perf_counter()
        self.stage = "fetch"
        samples = _read(self.dataset, task)
        if isinstance(samples, Collated):
            if self._takes_collated:
                now = perf_counter()
                self.timings = _stage_times((start, now, now, now, samples.size))
                return samples.batch
            samples = samples.rows()
        fetched = perf_counter()
        transformed = fetched
        if not self._identity:
            self.stage = "transform"
            samples = _transform(self.transform, samples)
            transformed = perf_counter()
        self.stage = "collate"
        if task.chunk is not None:
            batch: Any = Chunk(task.chunk[0], task.chunk[1], task.index, list(samples))
        else:
            batch = self.collator.apply(samples)
        self.timings = _stage_times((start, fetched, transformed, perf_counter(), len(samples)))
        return batch
