"""Fetch -> transform -> collate for one :class:`BatchTask`.

The same :class:`BatchMaker` runs in the main process (serial) and inside
workers (parallel); parallel mode only moves it, which is what makes
"parallel output == serial output" a real test.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any, Callable, NamedTuple

import numpy as np

from .._failure import LEFT_OUT
from .._local import install_batch_rng
from ..collator import Collator
from ..dataset import ArrayDataset, Collated
from ..transform import PseudoTransform
from .bad_samples import ErrorPolicy, SampleFailure
from .middle import Stages, fetch
from .seeding import GlobalSeeding, batch_seed, global_draw_marks, seed_all, warn_global_draws
from .task import BatchTask, Chunk


# A seeded thread worker's first batches are checked for draws from the global generators
# (two fingerprints of about 70 us each, a batch: ~1 ms a worker, once).
_WATCHED_BATCHES = 8


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


@dataclass
class BatchMaker:
    """Makes batches for one loader: the middle of the pipeline, fetch -> transform -> collate.

    ``seed`` None leaves random state alone. ``restore_random_state`` is set
    in the main process so the user's random streams are left as they were.
    ``policy`` says what becomes of a sample that fails (``on_error``); ``hooks`` are told of
    every stage run (:class:`~dataloader.hooks.StageHook`).
    """

    dataset: Any
    transform: Any
    collator: Any
    seed: int | None = None
    restore_random_state: bool = False
    # False in thread workers: global random state is shared by every thread.
    seed_globals: bool = True
    # A seeded loader's thread worker: its first batches are checked for draws from the global
    # generators, which no seed reaches there (logged once per process).
    watch_global_draws: bool = False
    # The stage running now, named in a worker's error message. Read it from outside; only
    # the maker writes it (mark_stage names the stages around a batch).
    stage: str = "fetch"
    # When the stages of the last batch began and ended (for the monitor); read-only outside.
    timings: "StageTimes | None" = None
    policy: ErrorPolicy = field(default_factory=ErrorPolicy)
    hooks: tuple = ()
    # The samples of the last batch that failed and were left out or replaced; read-only outside.
    failures: tuple[SampleFailure, ...] = ()
    # Run fetch and transform one sample at a time, each with its own hook events (the probe
    # that finds a sample that kills its worker; see _workers/probe.py).
    one_by_one: bool = False

    def __post_init__(self) -> None:
        # A batch the dataset collated itself is handed out as it is only when nothing would
        # have changed it: no per-sample transform and the default collator.
        self._identity = type(self.transform) is PseudoTransform  # no transform stage to run
        self._takes_collated = self._identity and type(self.collator) is Collator
        self._stages = Stages(self, transforms=not self._identity)
        self._globals = GlobalSeeding() if self.restore_random_state else None
        # Reading the dataset runs none of your code, nor do the other stages: nothing can draw.
        self._no_draws = self._takes_collated and not self.hooks and _reads_arrays(self.dataset)
        self._watch_left = _WATCHED_BATCHES if self.watch_global_draws else 0

    def __call__(self, task: BatchTask, seed_index: int | None = None) -> Any:
        """``task``'s batch, its random state seeded from (seed, epoch, ``seed_index`` or the
        task's index); not seeded where no code that could draw runs (an :class:`ArrayDataset`
        of numbers, no transform, the default collator, no hooks)."""
        if self.seed is None or (self._no_draws and task.samples is None and task.jobs is None):
            return self._make(task)
        seed = batch_seed(self.seed, task.epoch, task.index if seed_index is None else seed_index)
        previous = install_batch_rng(seed)
        try:
            if not self.seed_globals:
                return self.watched(task, self._make, task)
            if self._globals is not None:
                saved = self._globals.seed(seed)
                try:
                    return self._make(task)
                finally:
                    self._globals.restore(saved)
            seed_all(seed)
            return self._make(task)
        finally:
            install_batch_rng(previous)

    def watched(self, task: BatchTask, call: Callable[..., Any], *args: Any) -> Any:
        """``call(*args)`` for ``task``; in a seeded loader's thread worker, while its first
        batches are made, say once per process if the global generators were drawn from
        meanwhile: thread workers share them, so those draws escape ``seed=``."""
        if not self._watch_left:
            return call(*args)
        self._watch_left -= 1
        before = global_draw_marks()
        result = call(*args)
        if global_draw_marks() != before:
            warn_global_draws(task)
        return result

    def make_read(self, task: BatchTask, samples: list, started: float, seed_index: int) -> Any:
        """``task``'s batch from ``samples`` read elsewhere (a worker's own stream shard) since
        ``started``, a ``perf_counter`` time: the reading counts as the fetch stage. Seeded by
        ``seed_index``: where the batch stands in the shards, which, unlike the task's index,
        is the same in every run and in a resumed one."""
        batch = self(BatchTask(task.epoch, task.index, samples=samples), seed_index)
        self.timings = self.timings._replace(start=started)
        return batch

    def mark_stage(self, stage: str) -> None:
        """Name the stage running now outside of making a batch, for error messages: ``"fetch"``
        while a worker reads samples for :meth:`make_read`, ``"transport"`` after a batch is made."""
        self.stage = stage

    def _make(self, task: BatchTask) -> Any:
        start = perf_counter()
        stages = self._stages
        stages.begin()
        self.failures = ()
        samples = stages.fetch(task, start)
        if isinstance(samples, Collated):
            if self._takes_collated:
                now = perf_counter()
                self.timings = _stage_times((start, now, now, now, samples.size))
                return samples.batch
            samples = samples.rows()
        fetched = perf_counter()
        transformed = fetched
        if not self._identity:
            samples = stages.transform(task, samples, fetched)
            transformed = perf_counter()
        if stages.pending:
            samples = stages.resolve(task, samples)
            self.failures = stages.records
        if task.chunk is not None:
            batch: Any = Chunk(task.chunk[0], task.chunk[1], task.index, list(samples), task.epoch, stages.vacant)
        elif not samples:
            batch = LEFT_OUT
        else:
            batch = stages.collate(task, samples, transformed)
            self.failures = stages.records
        self.timings = _stage_times((start, fetched, transformed, perf_counter(), 0 if batch is LEFT_OUT else len(samples)))
        return batch


def _reads_arrays(dataset: Any) -> bool:
    """Whether ``dataset[i]`` only indexes NumPy arrays of numbers: an :class:`ArrayDataset`
    itself (no subclass) over plain arrays, whose samples no code of yours touches."""
    return type(dataset) is ArrayDataset and all(
        type(array) is np.ndarray and array.dtype.kind in "biufcmM" for array in dataset.arrays
    )
