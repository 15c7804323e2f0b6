"""Sources of streams: read by the main process, read by each worker, or called
(a :class:`~dataloader.CallableSource`)."""

from __future__ import annotations

import copy
import itertools
from typing import Any, Iterator

from ..callable_source import CallableSource
from ..errors import ArgumentValueError
from .consumer import Reassemble
from .position import PositionLog, Resume
from .source import Source, copying, fingerprint
from .streams import (
    batches_between_marks,
    batches_of,
    check_stream_resume,
    marked,
    open_stream,
    timed_stream,
)
from .task import BatchTask


class StreamSource(Source):
    """A stream read by the main process: a fresh ``iter(dataset)`` per epoch, cut into batches.

    With a ``timeout`` the stream is read in a helper thread (:func:`timed_stream`). A stream
    with ``state_dict()`` is asked for its position at every batch boundary, in the thread that
    reads it, so a state taken at any moment points at the first batch not handed out.
    """

    reads_stream_here = True
    notes_tokens = True

    def __init__(self, dataset: Any, batch_size: int, timeout: float = 0) -> None:
        self.dataset = dataset
        self.batch_size = batch_size
        self.timeout = timeout
        self._log = PositionLog()

    def order_fields(self, dataset: Any, options: Any) -> dict[str, Any]:
        return {"stream": fingerprint(self.dataset)}

    def tasks(self, epoch: int, resume: Resume | None = None) -> Iterator[BatchTask]:
        state = resume.token.get("stream") if resume is not None else None
        stream: Any = open_stream(self.dataset, epoch, copy.deepcopy(state), self.reweight and state is not None)
        capture = copying(getattr(self.dataset, "state_dict", None))
        first = resume.low if resume is not None and state is not None else 0
        note = self._log.note

        def noted(k: int, position: Any) -> None:
            # Before the first batch the stream stands where the state put it (its own
            # state_dict() may say so only once its iterator has started).
            note((epoch, first + k), state if k == 0 and state is not None else position)

        timed = None
        if self.timeout > 0:  # read ahead in a thread: positions travel with the samples
            items = marked(stream, self.batch_size, capture) if capture is not None else stream
            timed = timed_stream(items, self.timeout)
            if capture is not None:
                batches = batches_between_marks(timed, noted)
            else:
                batches = batches_of(timed, self.batch_size)
        else:
            read = None if capture is None else (lambda k: noted(k, capture()))
            batches = batches_of(stream, self.batch_size, read)
        index = first
        try:
            for samples in batches:
                index += 1
                if resume is not None and resume.skips(index - 1):
                    continue
                task = BatchTask(epoch, index - 1, samples=samples)
                # Batches handed out before the state, right after this one, are read past now:
                # once this one is handed out, a state points after them, at a noted position.
                while resume is not None and index in resume.above and next(batches, None) is not None:
                    index += 1
                yield task
        finally:
            if timed is not None:
                timed.close()  # stops its reader thread

    def resume_point(self, epoch: int, index: int, begun: bool = True) -> dict:
        if not begun or index == 0:  # the epoch's start: what a stream carries across epochs, if anything
            start = getattr(self.dataset, "epoch_start_state", None)
            state = start(epoch) if start is not None else None
            return {} if state is None else {"stream": state}
        token = self._log.get((epoch, index))
        return {"stream": token} if token is not None else {"reread": index}

    def forget_before(self, epoch: int, index: int) -> None:
        self._log.forget_before((epoch, index))

    def check_resume(self, token: dict, skip_ahead: bool, epoch: int | None = None) -> None:
        check_stream_resume(self.dataset, "stream" in token, "reread" in token, skip_ahead)

    def reshape(self, saved: list[dict], one_for_all: bool) -> Resume:
        """The streams' own states, one per old rank, for the stream to continue them all (a
        stream with ``loads_rank_states``, whose ``load_state_dict`` takes the list:
        ``ParquetStream``, ``ArrowStream``, ``TarStream``, ``MixedStream``)."""
        name = type(self.dataset).__name__
        if not getattr(self.dataset, "loads_rank_states", False):
            raise ArgumentValueError(
                f"{name} cannot resume on another number of ranks: only a stream whose "
                "load_state_dict() takes the list of every rank's states can (ParquetStream, "
                "ArrowStream, TarStream, MixedStream). Resume on the world_size and rank that saved the state."
            )
        if one_for_all:
            raise ArgumentValueError(
                f"one rank's state cannot resume {name} on another number of ranks: each rank read "
                "its own shard, so where the others stood is not in it. Pass the list of every rank's "
                "DataLoader state, in rank order (gather them with dataloader.gather_states, or "
                "save_rank_state/load_rank_states; see docs/checkpointing.md)."
            )
        tokens = [position["source"] for position in saved]
        if all(not token for token in tokens):  # every rank at the epoch's start
            return Resume()
        if not all("stream" in token for token in tokens):
            raise ArgumentValueError(
                f"some ranks' states hold no position of {name} (taken before their epoch began, "
                "while others had begun): pass the states every rank took at the same step."
            )
        return Resume(token={"stream": [token["stream"] for token in tokens]})


class WorkerStreamSource(Source):
    """Each worker reads its own copy of the stream; task k asks a worker for its next batch.

    The tasks never end by themselves: the epoch ends when every worker has
    reported the end of its shard. Resuming tells each worker how many batches of its shard
    to read and discard (the executor adds them to the worker's first task).
    """

    resumes_by_worker = True

    def __init__(self, dataset: Any, batch_size: int, workers: int) -> None:
        self.dataset = dataset
        self.worker_batch_size = batch_size
        self.stream_workers = workers  # fixed for the loader's life, num_workers="auto" included

    def order_fields(self, dataset: Any, options: Any) -> dict[str, Any]:
        # Each worker's shard depends on the worker count.
        return {"stream_workers": self.stream_workers, "stream": fingerprint(self.dataset)}

    def tasks(self, epoch: int, resume: Resume | None = None) -> Iterator[BatchTask]:
        for index in itertools.count():
            yield BatchTask(epoch, index)

    reshape_refused = (
        "with parallel_stream=True each worker reads its own shard and a state holds only how many "
        "batches each handed out: it cannot resume on another number of ranks. Save and resume with "
        "parallel_stream=False (the main process reads the stream; the workers still run the transforms)."
    )

    def check_resume(self, token: dict, skip_ahead: bool, epoch: int | None = None) -> None:
        if not skip_ahead:
            raise ArgumentValueError(
                "with parallel_stream=True each worker reads its own shard of the stream, so a "
                "resume makes each one re-read and discard the batches it handed out. That is "
                "exact only for a stream that reads the same samples each time an epoch is read; "
                "say so with load_state_dict(state, skip_ahead=True)."
            )


class CallableTasks(Source):
    """Batches from a :class:`~dataloader.CallableSource`, forever.

    ``data_source(batch_size)`` returns ready samples (one task) or
    zero-argument jobs; jobs are split into chunks of ``chunk_size`` that the
    workers run and :class:`~dataloader._stages.consumer.Reassemble` collates
    back in job order. A source with ``state_dict()`` (the ``CallableSource`` or its
    ``data_source``) is asked for its state before each call.
    """

    notes_tokens = True
    tasks_are_batches = False  # a batch's jobs may be split into chunks, a task each

    def __init__(self, source: CallableSource, batch_size: int) -> None:
        self.source = source
        self.batch_size = batch_size
        self._log = PositionLog()

    def order_fields(self, dataset: Any, options: Any) -> dict[str, Any]:
        return {"stream": fingerprint(self.source)}

    def tasks(self, epoch: int, resume: Resume | None = None) -> Iterator[BatchTask]:
        index, batch = 0, 0
        if resume is not None and resume.token:
            index, batch = resume.low, resume.token["batch"]
            if "source" in resume.token:
                self._owner().load_state_dict(copy.deepcopy(resume.token["source"]))
            else:  # skip-ahead: the calls that made the batches handed out, made again and dropped
                for _ in range(batch):
                    self.source.data_source(self.batch_size)
        self._log.note((epoch, index), self._token(batch))
        while True:
            tasks = self._call(epoch, index, batch)
            index, batch = index + len(tasks), batch + 1
            if resume is not None and resume.skips(tasks[0].index):
                continue
            # Batches handed out before the state, right after this one, are called past now:
            # once this one is handed out, a state points after them, at a noted position.
            while resume is not None and index in resume.above:
                index, batch = index + len(self._call(epoch, index, batch)), batch + 1
            yield from tasks

    def _call(self, epoch: int, index: int, batch: int) -> list[BatchTask]:
        """Batch ``batch``'s tasks, numbered from ``index``; then, before anything runs, the
        source's state for the next batch is noted (where a resume after this one starts)."""
        items = list(self.source.data_source(self.batch_size))
        if not items or not all(callable(item) for item in items):
            tasks = [BatchTask(epoch, index, samples=items)]
        else:
            size = self.source.chunk_size or len(items)
            starts = range(0, len(items), size)
            tasks = [
                BatchTask(epoch, index + part, jobs=items[start : start + size], chunk=(batch, len(starts), part, start))
                for part, start in enumerate(starts)
            ]
        self._log.note((epoch, index + len(tasks)), self._token(batch + 1))
        return tasks

    def consumer_stages(self, upstream: Any, collator: Any, policy: Any = None) -> Any:
        return Reassemble(upstream, collator, policy)

    def resume_point(self, epoch: int, index: int, begun: bool = True) -> dict:
        if not begun:
            return self._token(0)
        return self._log.get((epoch, index)) or {}

    def forget_before(self, epoch: int, index: int) -> None:
        self._log.forget_before((epoch, index))

    def check_resume(self, token: dict, skip_ahead: bool, epoch: int | None = None) -> None:
        holds = "source" in token
        check_stream_resume(self._owner(), holds, not holds and token.get("batch", 0) > 0, skip_ahead)

    def _owner(self) -> Any:
        """Whose state a resume restores: the ``CallableSource`` if it has ``state_dict()``,
        else its ``data_source``."""
        return self.source if hasattr(self.source, "state_dict") else self.source.data_source

    def _token(self, batch: int) -> dict:
        """Where a resume at call number ``batch`` starts: the count, and the source's state now."""
        state_dict = getattr(self._owner(), "state_dict", None)
        return {"batch": batch} if state_dict is None else {"batch": batch, "source": copy.deepcopy(state_dict())}
