"""Hooks: see every stage of the middle of the pipeline (fetch, transform, collate) as it runs.

A :class:`StageHook` is told before and after each stage runs on a batch, and when it fails,
with a :class:`StageEvent` that says which stage, which batch, which samples and when. Where
the loader has to find the sample that failed (``on_error="skip"`` or ``"replace"``), it runs
the stage again one sample at a time, and each of those runs is an event of ``level="sample"``.

Hooks run where the stages run: in this process with ``num_workers=0``, in each worker
otherwise (a process worker gets a pickled copy, so a hook that counts there counts that
worker's samples). The error policy's records and the monitor's stage times are made from
the same events; pass your own hooks with ``DataLoader(..., hooks=[...])``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

STAGE_NAMES = ("fetch", "transform", "collate")


@dataclass(frozen=True)
class StageEvent:
    """One run of a stage: ``stage`` on the samples ``indices`` of batch ``batch`` of ``epoch``.

    ``indices`` are the dataset's keys for a map dataset and the samples' positions in the
    batch for a stream (a stream's samples have no key). ``level`` is ``"batch"`` for a run over
    the whole batch and ``"sample"`` for a run over one sample (the error policy's search for
    the one that failed, or the draw of a substitute). ``start`` and ``end`` are
    ``time.perf_counter()`` values; ``end`` equals ``start`` in :meth:`StageHook.before`.
    """

    stage: str
    epoch: int
    batch: int
    indices: tuple[Any, ...]
    level: str
    start: float
    end: float

    @property
    def seconds(self) -> float:
        return self.end - self.start


class StageHook:
    """Override any of the three; each is called in the thread that runs the stage.

    A hook must not raise: an exception from a hook is the stage's failure.
    """

    def before(self, event: StageEvent) -> None:
        """The stage is about to run."""

    def after(self, event: StageEvent) -> None:
        """The stage ran."""

    def failed(self, event: StageEvent, error: BaseException) -> None:
        """The stage raised ``error`` (the loader then raises it, or searches for the sample)."""
