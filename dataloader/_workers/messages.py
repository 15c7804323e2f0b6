"""The worker protocol: typed messages, never bare tuples.

Main -> worker: :class:`RunTask` (or :class:`RunTasks`), :class:`ReleaseSegments`,
:class:`Overflow`, :class:`Shutdown`.
Worker -> main: :class:`Started`, :class:`SegmentCreated` (its descriptor follows on the
socket), :class:`SegmentRetired`, :class:`BatchDone`, :class:`BatchFailed`,
:class:`StreamEnded` (or the three of a :class:`RunTasks` in one :class:`Replies`),
:class:`WaitingForRoom`, :class:`InitFailed`.

Frozen dataclasses without ``__slots__``: a slotted dataclass pickles through a
walk over its fields that costs twice as much, on every message both ways.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._stages.batch import StageTimes
from .._stages.task import BatchTask
from .._transport.codec import InlineBatch, LocalBatch, SharedBatch
from .remote_error import RemoteError


@dataclass(frozen=True)
class RunTask:
    task: BatchTask
    # Segments the user dropped since the last message, so one send does both.
    released: tuple[int, ...] = ()


@dataclass(frozen=True)
class RunTasks:
    """Several consecutive tasks in one message, for batches so small that a message and a
    wake-up per batch would cost more than making it. The worker makes them in order and
    answers them all in one :class:`Replies`."""

    tasks: tuple[BatchTask, ...]
    released: tuple[int, ...] = ()


@dataclass(frozen=True)
class ReleaseSegments:
    segment_ids: tuple[int, ...]


@dataclass(frozen=True)
class Overflow:
    """The main process is blocked on this worker: send the waiting batch inline."""


@dataclass(frozen=True)
class Shutdown:
    pass


@dataclass(frozen=True)
class Started:
    worker_id: int
    pid: int


@dataclass(frozen=True)
class InitFailed:
    error: RemoteError


@dataclass(frozen=True)
class SegmentCreated:
    segment_id: int
    size: int


@dataclass(frozen=True)
class SegmentRetired:
    segment_id: int


@dataclass(frozen=True)
class BatchDone:
    epoch: int
    index: int
    payload: InlineBatch | SharedBatch | LocalBatch
    timings: StageTimes | None = None
    # perf_counter when the worker sent it: collated..sent is the worker's transport time.
    sent: float | None = None
    # Samples of this batch that failed and were left out or replaced (SampleFailure records).
    failures: tuple = ()


@dataclass(frozen=True)
class BatchFailed:
    epoch: int
    index: int
    error: RemoteError
    # The epoch goes on past it (the error is raised at its turn, and the next batch follows);
    # False for a part of a batch split across workers, whose other parts cannot stand alone.
    recoverable: bool = True


@dataclass(frozen=True)
class BatchLeftOut:
    """Every sample of task ``index`` failed under ``on_error="skip"``: it made no batch."""

    epoch: int
    index: int
    failures: tuple = ()
    timings: StageTimes | None = None


@dataclass(frozen=True)
class StreamEnded:
    """This worker's shard of the stream is exhausted; task ``index`` made no batch."""

    epoch: int
    index: int


@dataclass(frozen=True)
class Replies:
    """The answers to one :class:`RunTasks` (:class:`BatchDone`, :class:`BatchFailed`,
    :class:`StreamEnded`), in task order; sent early, in part, before the worker blocks."""

    messages: tuple[Any, ...]


@dataclass(frozen=True)
class WaitingForRoom:
    """The worker's shared-memory budget is full of batches the user still holds."""

    needed: int
    reserved: int
    budget: int
    # How many messages freeing segments the worker had read: fewer than the main process
    # sent means one is on its way, and the worker asks again if that frees too little.
    heard: int = 0
