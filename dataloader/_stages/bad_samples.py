"""The bad-sample policy: what becomes of a sample whose fetch or transform fails.

Pure and small: it says which samples are left out or replaced and by what, as a function of
the data and (seed, epoch, batch index, failed sample) only, so that a batch is the same for
any worker count and after a resume. :class:`~dataloader._stages.batch.BatchMaker` drives it;
the records it makes travel home with their batch.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from .._failure_book import SUBSTITUTE_DRAWS
from .task import BatchTask

@dataclass(frozen=True)
class SampleFailure:
    """One sample that failed: where, why, and what the loader did about it.

    ``index`` is the dataset's key for the sample (a map dataset), or None for a stream's
    sample, whose ``position`` in its batch is given instead. ``action`` is ``"skipped"``,
    ``"replaced"`` (by ``substitute``, a key, or a position in the batch for a stream) or
    ``"raised"``. ``signal`` names the signal when the sample killed its worker.
    """

    epoch: int
    batch: int
    index: Any
    position: int
    stage: str
    error: str
    message: str
    action: str
    worker: int = -1
    pid: int = 0
    substitute: Any = None
    signal: str | None = None

    def as_json(self) -> dict[str, Any]:
        """The record as JSON-ready values (a key that is not a JSON value becomes its repr)."""
        record = asdict(self)
        for name in ("index", "substitute"):
            if not isinstance(record[name], (int, float, str, type(None))):
                record[name] = repr(record[name])
        return record

    def describe(self) -> str:
        """One line for a person: where the sample is, what raised, and in which process."""
        where = f"index {self.index!r}" if self.index is not None else f"position {self.position}"
        worker = "main process" if self.worker < 0 else f"worker {self.worker} (pid {self.pid})"
        return f"epoch {self.epoch} batch {self.batch} {where}: {self.stage} raised {self.error}: {self.message} [{worker}]"


@dataclass(frozen=True)
class ErrorPolicy:
    """``on_error`` and the seed its substitutes are drawn from (sent to every worker)."""

    on_error: str = "raise"
    seed: int = 0
    worker: int = -1

    @property
    def salvages(self) -> bool:
        """True where a failed sample is searched for and left out or replaced."""
        return self.on_error != "raise"

    def substitute_key(self, epoch: int, batch: int, position: int, attempt: int, length: int) -> int:
        """The ``attempt``-th substitute for the sample at ``position`` of a batch: a key drawn
        uniformly from ``range(length)``, fixed by (seed, epoch, batch, position, attempt)."""
        return int(_rng(self.seed, epoch, batch, position, attempt).integers(length))

    def stand_in(self, epoch: int, batch: int, position: int, good: int) -> int:
        """Which of the batch's ``good`` samples stands in for the one at ``position``."""
        return int(_rng(self.seed, epoch, batch, position, SUBSTITUTE_DRAWS).integers(good))

    def record(
        self, task: BatchTask, index: Any, position: int, stage: str, error: BaseException, action: str,
        substitute: Any = None,
    ) -> SampleFailure:
        """The record of the sample at ``position`` of ``task`` (named by the batch handed out
        and the place in it, also for a part of a split batch)."""
        batch, offset = batch_of(task)
        return SampleFailure(
            task.epoch, batch, index, offset + position, stage, type(error).__name__, _message(error), action,
            self.worker, os.getpid(), substitute, getattr(error, "signal", None),
        )


def batch_of(task: BatchTask) -> tuple[int, int]:
    """The batch ``task``'s samples are handed out in, and the place of its first sample there."""
    if task.chunk is None:
        return task.index, 0
    return task.chunk[0], task.chunk[3]


def _rng(*words: int) -> np.random.Generator:
    return np.random.default_rng([word % 2**64 for word in words])


def _message(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    first = text[0] if text else ""
    return first if len(first) <= 300 else first[:297] + "..."
