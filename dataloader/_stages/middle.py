"""The three stages of the middle of the pipeline, run over one batch: fetch, transform, collate.

:class:`Stages` runs them for a :class:`~dataloader._stages.batch.BatchMaker`, tells its hooks
of each run (:mod:`dataloader.hooks`) and, under ``on_error="skip"`` or ``"replace"``, finds the
samples that failed: a bulk read (``__getitems__``) or a batch transform (``apply_batch``) that
raises is run again one sample at a time, a sample that is None counts as failed, and
:meth:`Stages.resolve` leaves the failed ones out or puts substitutes in their places
(:mod:`~dataloader._stages.bad_samples` says which). With no hooks and ``on_error="raise"``
a batch costs what it cost before there were stages: a few attribute reads.
"""

from __future__ import annotations

from time import perf_counter
from typing import Any

import numpy as np

from .._failure import LEFT_OUT
from ..dataset import Collated, read_samples
from ..errors import ArgumentValueError, SampleError, WorkerDiedError
from ..hooks import StageEvent
from .._failure_book import SUBSTITUTE_DRAWS
from .bad_samples import SampleFailure, batch_of
from .task import BatchTask, listed

_FAILED = object()  # the place of a sample that failed, until resolve()


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


def _read_key(dataset: Any, key: Any) -> Any:
    """The sample at ``key``, read on its own (a dataset that collates its batches without
    their rows is read with ``dataset[key]``)."""
    _check_not_negative([key])
    got = read_samples(dataset, [key])
    if not isinstance(got, Collated):
        return got[0]
    return got.rows()[0] if got.has_rows else dataset[key]


class Stages:
    """Fetch, transform and collate for one maker (whose ``stage`` it keeps up to date)."""

    def __init__(self, maker: Any, transforms: bool) -> None:
        self._maker = maker
        self._transforms = transforms  # a per-sample transform to run (not PseudoTransform)
        self._dataset = maker.dataset
        self._transform = maker.transform
        self._collator = maker.collator
        self._policy = maker.policy
        self._salvages = maker.policy.salvages
        self._hooks = tuple(maker.hooks)
        self._one_by_one = maker.one_by_one
        self._length: int | None | bool = False  # len(dataset), once asked for (None: it has none)
        # This batch's samples that failed: (position, key, stage, error), and the records.
        self.pending: list[tuple[int, Any, str, BaseException]] = []
        self.records: tuple[SampleFailure, ...] = ()
        self.vacant: tuple[int, ...] = ()  # places of a split batch's part left to fill (replace)

    def begin(self) -> None:
        """A new batch: forget the last one's failures."""
        if self.pending:
            self.pending = []
            self.vacant = ()
        self.records = ()

    # -- fetch ------------------------------------------------------------------------------

    def fetch(self, task: BatchTask, start: float) -> list | Collated:
        self._maker.stage = "fetch"
        if (task.bad or self._one_by_one) and self._salvages and task.samples is None:
            return self._fetch_each(task)
        hooks = self._hooks
        if hooks:
            self._fire("before", "fetch", task, start)
        try:
            samples = _read(self._dataset, task)
        except Exception as error:
            if hooks:
                self._fire("failed", "fetch", task, start, error)
            if not self._salvages or task.samples is not None:
                raise
            return self._fetch_each(task)
        if hooks:
            self._fire("after", "fetch", task, start)
        if self._salvages and type(samples) is list:
            self._find_none(task, samples, "fetch", range(len(samples)))
        return samples

    def _fetch_each(self, task: BatchTask) -> list:
        """The batch read one sample at a time; a sample that raises leaves its place failed."""
        keys = _keys(task)
        count = len(task.jobs) if task.jobs is not None else len(keys or ())
        killers = {entry[0]: entry for entry in task.bad}
        samples = []
        for position in range(count):
            killer = killers.get(keys[position] if keys is not None else position)
            if killer is None:
                samples.append(self._one("fetch", task, position, keys, lambda: self._read_one(task, position, keys)))
            else:  # never read again: it kills the process that reads it
                self.pending.append((position, killer[0] if keys is not None else None, killer[1], _killed(killer)))
                samples.append(_FAILED)
        self._find_none(task, samples, "fetch", range(count))
        return samples

    def _read_one(self, task: BatchTask, position: int, keys: list | None) -> Any:
        if task.jobs is not None:
            return task.jobs[position]()
        return _read_key(self._dataset, keys[position])  # type: ignore[index]

    # -- transform --------------------------------------------------------------------------

    def transform(self, task: BatchTask, samples: list, start: float) -> list:
        self._maker.stage = "transform"
        hooks = self._hooks
        if not self.pending:
            good, places = samples, None
        else:
            places = [p for p, sample in enumerate(samples) if sample is not _FAILED]
            good = [samples[p] for p in places]
        if self._one_by_one and self._salvages:
            return self._transform_apart(task, samples, good, places)
        if hooks:
            self._fire("before", "transform", task, start, places=places)
        try:
            done = _transform(self._transform, good)
        except Exception as error:
            if hooks:
                self._fire("failed", "transform", task, start, error, places=places)
            if not self._salvages:
                raise
            done = self._transform_each(task, good, places)
        else:
            if hooks:
                self._fire("after", "transform", task, start, places=places)
        return self._placed(task, samples, done, places)

    def _transform_apart(self, task: BatchTask, samples: list, good: list, places: list[int] | None) -> list:
        return self._placed(task, samples, self._transform_each(task, good, places), places)

    def _placed(self, task: BatchTask, samples: list, done: list, places: list[int] | None) -> list:
        """The transformed ``done`` back in their places among ``samples`` (None checked)."""
        if not self._salvages:
            return done
        positions = places if places is not None else range(len(done))
        self._find_none(task, done, "transform", positions)
        if places is None:
            return done
        result: list = [_FAILED] * len(samples)
        for place, sample in zip(places, done):
            result[place] = sample
        return result

    def _transform_each(self, task: BatchTask, good: list, places: list[int] | None) -> list:
        keys = _keys(task)
        positions = places if places is not None else range(len(good))
        return [
            self._one("transform", task, position, keys, lambda: _transform(self._transform, [sample])[0])
            for position, sample in zip(positions, good)
        ]

    # -- failed samples ---------------------------------------------------------------------

    def _one(self, stage: str, task: BatchTask, position: int, keys: list | None, run: Any) -> Any:
        """The sample at ``position`` through ``run()``; ``_FAILED`` (noted) if it raises."""
        sample, error = self._attempt(stage, task, keys[position] if keys is not None else position, run)
        if error is not None:
            self.pending.append((position, keys[position] if keys is not None else None, stage, error))
        return sample

    def _attempt(self, stage: str, task: BatchTask, key: Any, run: Any) -> tuple[Any, Exception | None]:
        """``run()`` for one sample, with its own events: (the sample, None) or (_FAILED, the error)."""
        start = perf_counter()
        if self._hooks:
            self._fire_one("before", stage, task, key, start)
        try:
            sample = run()
        except Exception as error:
            if self._hooks:
                self._fire_one("failed", stage, task, key, start, error)
            return _FAILED, error
        if self._hooks:
            self._fire_one("after", stage, task, key, start)
        return sample, None

    def _find_none(self, task: BatchTask, samples: list, stage: str, positions: Any) -> None:
        """A sample that is None failed too (the convention of PyTorch's custom-collate workaround)."""
        keys = None
        for at, (position, sample) in enumerate(zip(positions, samples)):
            if sample is None:
                keys = keys if keys is not None else _keys(task)
                made_by = "the dataset" if stage == "fetch" else "the transform"
                error = SampleError(f"{made_by} returned None for this sample")
                self.pending.append((position, keys[position] if keys is not None else None, stage, error))
                samples[at] = _FAILED

    def resolve(self, task: BatchTask, samples: list) -> list:
        """The batch with its failed samples left out (skip) or replaced (replace), and the
        records of what became of each."""
        policy, records = self._policy, []
        failed = sorted(self.pending, key=lambda entry: entry[0])
        if policy.on_error == "skip":
            for position, key, stage, error in failed:
                records.append(policy.record(task, key, position, stage, error, "skipped"))
            self.records = tuple(records)
            return [sample for sample in samples if sample is not _FAILED]
        good = [p for p, sample in enumerate(samples) if sample is not _FAILED]
        vacant: list[int] = []
        for position, key, stage, error in failed:
            tried: list[SampleFailure] = []
            substitute, by = self._substitute(task, position, good, samples, tried)
            action = "replaced" if substitute is not _FAILED else "skipped"
            if substitute is _FAILED and task.chunk is not None:
                # A part of a split batch with no good sample: its place is filled when the
                # batch is put together (Reassemble), from the other parts' samples.
                action, substitute = "replaced", None
                vacant.append(position)
            records.append(policy.record(task, key, position, stage, error, action, by))
            records.extend(tried)
            samples[position] = substitute
        self.records = tuple(records)
        self.vacant = tuple(vacant)
        return [sample for sample in samples if sample is not _FAILED]

    def _substitute(self, task: BatchTask, position: int, good: list[int], samples: list, tried: list) -> tuple:
        """A substitute for the sample at ``position``: a sample drawn from the whole dataset
        (a map dataset with int keys), else one of the batch's good samples; with neither, none."""
        policy, length = self._policy, self._dataset_length()
        if length and task.indices is not None and all(type(key) is int for key in _keys(task) or ()):
            for attempt in range(SUBSTITUTE_DRAWS):
                key = policy.substitute_key(task.epoch, task.index, position, attempt, length)
                sample, error, stage = self._draw(task, key)
                if error is None:
                    return sample, key
                tried.append(policy.record(task, key, position, stage, error, "skipped"))
        if good:
            stand_in = good[policy.stand_in(task.epoch, task.index, position, len(good))]
            keys = _keys(task)
            return samples[stand_in], keys[stand_in] if keys is not None else stand_in
        return _FAILED, None

    def _draw(self, task: BatchTask, key: int) -> tuple[Any, Exception | None, str]:
        """The substitute at ``key``, fetched and transformed: (sample, None, "") or (_, error, stage)."""
        sample, error = self._attempt("fetch", task, key, lambda: self._read_substitute(task, key))
        if error is not None:
            return sample, error, "fetch"
        if sample is not None and self._transforms:
            sample, error = self._attempt("transform", task, key, lambda: _transform(self._transform, [sample])[0])
            if error is not None:
                return sample, error, "transform"
        if sample is None:
            return sample, SampleError("the substitute is None"), "fetch"
        return sample, None, ""

    def _read_substitute(self, task: BatchTask, key: int) -> Any:
        for killer in task.bad:
            if killer[0] == key:
                raise _killed(killer)
        return _read_key(self._dataset, key)

    def _dataset_length(self) -> int | None:
        if self._length is False:
            try:
                self._length = len(self._dataset)
            except Exception:
                self._length = None
        return self._length  # type: ignore[return-value]

    # -- collate ----------------------------------------------------------------------------

    def collate(self, task: BatchTask, samples: list, start: float) -> Any:
        self._maker.stage = "collate"
        hooks = self._hooks
        if hooks:
            self._fire("before", "collate", task, start, count=len(samples))
        try:
            batch = self._collator.apply(samples)
        except Exception as error:
            if hooks:
                self._fire("failed", "collate", task, start, error, count=len(samples))
            if not self._salvages:
                raise
            return self._collate_failed(task, len(samples), error)
        if hooks:
            self._fire("after", "collate", task, start, count=len(samples))
        return batch

    def _collate_failed(self, task: BatchTask, count: int, error: BaseException) -> Any:
        """Under skip or replace, a batch that cannot be collated is left out (no one sample is
        to blame for ragged shapes); each of its samples is recorded, so the log names them."""
        keys = _keys(task)
        if keys is not None and len(keys) != count:  # replaced or left out: the places moved
            keys = None
        records = [
            self._policy.record(task, keys[p] if keys else None, p, "collate", error, "skipped")
            for p in range(count)
        ]
        self.records = self.records + tuple(records)
        return LEFT_OUT

    # -- hooks ------------------------------------------------------------------------------

    def _fire(
        self, kind: str, stage: str, task: BatchTask, start: float, error: BaseException | None = None,
        places: list[int] | None = None, count: int | None = None,
    ) -> None:
        keys = _keys(task)
        if keys is None:
            size = count if count is not None else len(task.jobs if task.jobs is not None else task.samples or ())
            keys = list(range(size))
        if places is not None:
            keys = [keys[p] for p in places]
        end = start if kind == "before" else perf_counter()
        self._notify(kind, StageEvent(stage, task.epoch, batch_of(task)[0], tuple(keys), "batch", start, end), error)

    def _fire_one(self, kind: str, stage: str, task: BatchTask, key: Any, start: float, error: BaseException | None = None) -> None:
        end = start if kind == "before" else perf_counter()
        self._notify(kind, StageEvent(stage, task.epoch, batch_of(task)[0], (key,), "sample", start, end), error)

    def _notify(self, kind: str, event: StageEvent, error: BaseException | None) -> None:
        for hook in self._hooks:
            if kind == "failed":
                hook.failed(event, error)
            else:
                getattr(hook, kind)(event)


def _killed(killer: tuple[Any, str, str, str]) -> WorkerDiedError:
    """The error recorded for a sample that killed the worker reading it."""
    error = WorkerDiedError(killer[2])
    error.signal = killer[3]  # type: ignore[attr-defined]
    return error


def _keys(task: BatchTask) -> list | None:
    """The dataset's keys of ``task``'s samples, or None for a stream's or jobs' samples."""
    return listed(task.indices) if task.indices is not None else None
