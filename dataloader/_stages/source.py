"""Sources: where an epoch's tasks come from. With :mod:`.kinds` (which tells a dataset's
kind and checks its sampler), the only module that knows dataset kinds.

Every source offers the same small interface (:class:`Source`): the tasks of
an epoch, their number, the consumer-side stage it needs, ``close()``, and
what a resume needs (a token per batch, see :mod:`.position`). :func:`build_source` picks one
from the dataset and the loader's options; executors receive tasks and never ask what is
behind them.

==========================  =================================================
``MapSource``               a map dataset: one task per index list of the sampler
``StreamSource``            a stream read by the main process, cut into batches
``WorkerStreamSource``      a stream each worker reads itself (``parallel_stream``)
``CallableTasks``           a :class:`~dataloader.CallableSource`'s batches or jobs
``FixedEpochs``             wraps any of them: ``epoch_size`` batches per epoch,
                            carrying on where the previous epoch stopped
==========================  =================================================

A new kind of source is one more class here and one more branch in
:func:`build_source`; nothing else changes.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import replace
from typing import Any, Iterator

from .._digest import qualified_name
from .._validate import warn_argument
from ..callable_source import CallableSource
from ..errors import ArgumentTypeError, ArgumentValueError, ResumeWarning
from ..memory import available_cpus
from ..sampler import MapSampler, batches_from, sampler_state, yields_valid_indices
from .consumer import Reassemble
from .kinds import is_stream
from .position import PositionLog, Resume
from .streams import (
    BatchSize,
    batches_between_marks,
    batches_of,
    check_stream_resume,
    marked,
    open_stream,
    restarting,
    timed_stream,
)
from .task import BatchTask


class Source:
    """The contract between a dataset kind and the pipeline.

    ``worker_batch_size`` is set when each worker reads its own stream (the
    pool hands it to the workers, and the tasks carry no payload);
    ``worker_restart`` when those streams carry on across epochs, so the
    workers must too. ``reads_stream_here`` when making a task reads the
    stream in this process (the monitor times it as the ``read`` stage).

    Resuming (:mod:`~dataloader._stages.position`): ``tasks(epoch, resume)`` starts where a
    saved state left off; :meth:`resume_point` is the token that restarts the epoch's tasks at
    a batch, and :meth:`check_resume` refuses, before any work, a token this source cannot use.
    A source also says what a state must match to fit it (:meth:`order_fields`), whether a
    state counts batches per worker (``resumes_by_worker``) and whether it carries the
    dataset's own state (``holds_dataset_state``): the checkpoint code asks, and never looks
    at a source's class.
    """

    worker_batch_size: int | None = None
    worker_restart: bool = False
    # Workers reading their own shards: how many there are (they cannot change mid-run).
    stream_workers: int | None = None
    reads_stream_here: bool = False
    notes_tokens = False  # True: it keeps a token per batch, pruned by forget_before()
    # A state's task numbers mean nothing: each worker's count of batches says where it stands.
    resumes_by_worker = False
    # The dataset's state_dict() goes into the loader's state (a map dataset's).
    holds_dataset_state = False
    # Each batch is one task (no batch split into chunks): batches handed out = tasks done.
    tasks_are_batches = True

    @property
    def reader(self) -> "Source":
        """The source that reads the dataset (a source that wraps another names that one)."""
        return self

    def order_fields(self, dataset: Any, options: Any) -> dict[str, Any]:
        """Settings of this source, besides the loader's, that decide which batch is which:
        a saved state fits only a source with the same values."""
        return {}

    def tasks(self, epoch: int, resume: Resume | None = None) -> Iterator[BatchTask]:
        """The tasks of ``epoch``, numbered from 0 (from ``resume.low`` when resuming, leaving
        out the ones ``resume`` says were handed out); closing the iterator frees what it opened."""
        raise NotImplementedError

    def length(self) -> int | None:
        """Batches in one epoch, or None when only reading tells (a stream)."""
        return None

    def consumer_stages(self, upstream: Any, collator: Any, policy: Any = None) -> Any:
        """Wrap the executor in the stages this source's batches need before hand-out
        (``policy``: the loader's :class:`~dataloader._stages.bad_samples.ErrorPolicy`)."""
        return upstream

    def close(self) -> None:
        """Release what lives across epochs (an open stream); idempotent."""

    def resume_point(self, epoch: int, index: int, begun: bool = True) -> dict:
        """Plain values that let ``tasks(epoch, resume)`` start at batch ``index`` (which the
        epoch has made, or will make next). ``begun=False``: the epoch has not started yet."""
        return {}

    def forget_before(self, epoch: int, index: int) -> None:
        """Batches before ``index`` of ``epoch`` were handed out: tokens noted for them can go."""

    def check_resume(self, token: dict, skip_ahead: bool, epoch: int | None = None) -> None:
        """Raise a clear error, before any work, when ``token`` cannot restart this source
        (``epoch``: the epoch the state resumes, where the token must agree with it)."""

    def rewind(self, token: dict) -> None:
        """An epoch was left early at ``token`` (its first batch not handed out): a source whose
        next epoch carries on from this one starts it there, so batches read ahead and never
        handed out are not lost."""


class MapSource(Source):
    """A map-style dataset: one task per index list the sampler yields, read lazily.

    Resuming restores the sampler's state at the start of the epoch and skips the batches
    handed out without making them (:func:`~dataloader.sampler.batches_from`).
    """

    notes_tokens = True  # one per epoch: the sampler's state as the epoch began
    holds_dataset_state = True

    def order_fields(self, dataset: Any, options: Any) -> dict[str, Any]:
        # Batch indices mean other samples in another length, or in other files of the same one.
        return {"length": len(dataset), "dataset": fingerprint(dataset, own_only=True)}

    def __init__(self, sampler: Any) -> None:
        self.sampler = sampler
        self._started: dict[int, Any] = {}  # epoch -> the sampler's state as it began
        self._ours = yields_valid_indices(sampler)  # its batches need no copy

    def tasks(self, epoch: int, resume: Resume | None = None) -> Iterator[BatchTask]:
        start = 0
        if resume is not None:
            if "sampler" in resume.token:
                self.sampler.load_state_dict(resume.token["sampler"])
            start = resume.low
        self._started[epoch] = copy.deepcopy(sampler_state(self.sampler))  # not a live object of the sampler's
        # Our samplers' batches need no copy: int64 arrays (sent to workers as bytes, made
        # Python ints where the dataset is read, unchecked) or, through Infinite, new lists.
        ours = self._ours
        for index, indices in enumerate(batches_from(self.sampler, start, arrays=ours), start):
            if resume is None or index not in resume.above:
                yield BatchTask(epoch, index, indices=indices if ours else index_list(indices, index))

    def length(self) -> int | None:
        return len(self.sampler)

    def resume_point(self, epoch: int, index: int, begun: bool = True) -> dict:
        length = known_length(self)
        if begun and epoch in self._started and (length is None or index < length):
            state = self._started[epoch]
        else:  # an epoch not begun yet: the sampler as the last one left it
            state = sampler_state(self.sampler)
        return {} if state is None else {"sampler": state}

    def forget_before(self, epoch: int, index: int) -> None:
        for begun in [key for key in self._started if key < epoch]:
            del self._started[begun]

    def check_resume(self, token: dict, skip_ahead: bool, epoch: int | None = None) -> None:
        if "sampler" in token:
            _check_sampler_epoch(self.sampler, token["sampler"], epoch)
            if not hasattr(self.sampler, "load_state_dict"):
                raise ArgumentValueError(
                    f"the state holds the sampler's own state, but this loader's "
                    f"{type(self.sampler).__name__} has no load_state_dict(). Resume with the sampler "
                    "that saved it."
                )
            self.sampler.load_state_dict(token["sampler"])  # now: a sampler that differs says so here
        else:
            warn_argument(
                f"{type(self.sampler).__name__} has no state_dict()/load_state_dict(): resuming "
                "iterates it afresh and skips the batches already handed out, which is exact only "
                "if its order depends on nothing but the epoch. Give it both methods to make the "
                "resume exact.",
                ResumeWarning,
            )


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
        stream: Any = open_stream(self.dataset, epoch, copy.deepcopy(state))
        capture = _copying(getattr(self.dataset, "state_dict", None))
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
        if not begun or index == 0:
            return {}
        token = self._log.get((epoch, index))
        return {"stream": token} if token is not None else {"reread": index}

    def forget_before(self, epoch: int, index: int) -> None:
        self._log.forget_before((epoch, index))

    def check_resume(self, token: dict, skip_ahead: bool, epoch: int | None = None) -> None:
        check_stream_resume(self.dataset, "stream" in token, "reread" in token, skip_ahead)


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


class FixedEpochs(Source):
    """Exactly ``epoch_size`` batches per epoch from ``inner``, carrying on across epochs.

    The inner source's tasks form one feed that outlives each epoch; when it
    ends in the middle of an epoch it is opened again (:func:`restarting`) and
    the epoch is completed from the fresh one. A batch split into chunks counts once.
    Before each task it notes where the feed stands after it, (inner epoch, or pass; inner
    index), so a state can restart the feed there; the inner source's token for that place is
    asked for only when a state is taken, and pruned only as batches are handed out.
    """

    notes_tokens = True

    @property
    def reader(self) -> Source:
        return self.inner.reader

    def order_fields(self, dataset: Any, options: Any) -> dict[str, Any]:
        return self.inner.order_fields(dataset, options)

    def __init__(self, inner: Source, epoch_size: int) -> None:
        self.inner = inner
        self.epoch_size = epoch_size
        self.worker_batch_size = inner.worker_batch_size
        self.stream_workers = inner.stream_workers
        # Workers reading their own streams keep them open across epochs, restarting at the end.
        self.worker_restart = inner.worker_batch_size is not None
        self.reads_stream_here = inner.reads_stream_here
        self.tasks_are_batches = inner.tasks_are_batches
        self._feed: Iterator[BatchTask] | None = None
        self._log = PositionLog()
        self._after_last: tuple[int, int] | None = None  # (pass, inner index) after the latest task
        self._inner_length: int | None = -1  # -1: not asked yet (a sampler's len() may raise)

    def tasks(self, epoch: int, resume: Resume | None = None) -> Iterator[BatchTask]:
        done = index = 0
        if resume is not None and resume.token:
            token = resume.token
            start = (token["pass"], token["index"])
            self._feed = self._open_feed(*start, token["inner"], resume.skip_ahead)
            done, index = resume.count, resume.low
        else:
            if self._feed is None:  # the first epoch, or the feed raised last epoch: afresh
                self._feed, self._after_last = self._open_feed(epoch, 0, None, False), None
            start = self._after_last or (epoch, 0)
        self._log.note((epoch, index), start)
        # Batches handed out above `low` are counted in resume.count, yet their tasks must still
        # be read past: the epoch ends after the last of them, not at the count.
        last_skipped = max(resume.above, default=-1) if resume is not None else -1
        while done < self.epoch_size or index <= last_skipped:
            task = self._pull(epoch, index)
            if task is None:  # the feed raised last epoch (the error went to the user): start afresh
                self._feed = None
                return
            index += 1
            if resume is not None and resume.skips(index - 1):
                continue  # handed out before the state was taken, and counted in resume.count
            out = replace(task, epoch=epoch, index=index - 1)
            # Tasks handed out before the state, right after this one, are read past now: once
            # this one is handed out, a state points after them, at a noted position.
            while resume is not None and index in resume.above and self._pull(epoch, index) is not None:
                index += 1
            yield out
            done += task.chunk is None or task.chunk[2] == task.chunk[1] - 1

    def _pull(self, epoch: int, index: int) -> BatchTask | None:
        """The feed's next task (``index`` of ``epoch``), noting where the feed stands after it:
        (pass, next inner batch), or the next pass's start."""
        task = next(self._feed, None)  # type: ignore[arg-type]
        if task is not None:
            after = task.index + 1
            if self._inner_length == -1:
                self._inner_length = known_length(self.inner)
            if self._inner_length is not None and after >= self._inner_length and task.chunk is None:
                self._after_last = (task.epoch + 1, 0)
            else:
                self._after_last = (task.epoch, after)
            self._log.note((epoch, index + 1), self._after_last)
        return task

    def _open_feed(self, pass_: int, index: int, inner_token: dict | None, skip_ahead: bool) -> Iterator[BatchTask]:
        """The inner tasks from batch ``index`` of pass ``pass_`` on, passes after it in full."""
        fresh = inner_token is None and index == 0
        passes = itertools.count(pass_ if fresh else pass_ + 1)  # each pass is an inner epoch
        feed = restarting(
            lambda: self.inner.tasks(next(passes)),
            "the dataset or sampler produced no batch; fixed-size epochs (epoch_size) need "
            "a source that is not empty.",
        )
        if fresh:
            return feed
        resumed = self.inner.tasks(pass_, Resume(low=index, token=inner_token or {}, skip_ahead=skip_ahead))
        return _chained(resumed, feed)  # a resumed pass may have nothing left

    def _token(self, at: tuple[int, int], begun: bool = True) -> dict:
        """The plain values that restart the feed at ``at``: (pass, inner index) and the inner token."""
        return {"pass": at[0], "index": at[1], "inner": self.inner.resume_point(*at, begun=begun)}

    def length(self) -> int | None:
        return self.epoch_size

    def consumer_stages(self, upstream: Any, collator: Any, policy: Any = None) -> Any:
        return self.inner.consumer_stages(upstream, collator, policy)

    def close(self) -> None:
        feed, self._feed = self._feed, None
        if feed is not None:
            feed.close()  # type: ignore[attr-defined]
        self.inner.close()

    def rewind(self, token: dict) -> None:
        # Only where the inner source can be put back without re-reading what it yielded.
        if not token or self.worker_restart:
            return
        try:
            self.inner.check_resume(token["inner"], skip_ahead=False)
        except ArgumentValueError:
            return  # a stream without state_dict(): the next epoch goes on after what was read
        start = (token["pass"], token["index"])
        self.close()
        self._feed = self._open_feed(*start, token["inner"], skip_ahead=False)
        self._after_last = start

    def resume_point(self, epoch: int, index: int, begun: bool = True) -> dict:
        if begun:
            at = self._log.get((epoch, index))
            return {} if at is None else self._token(at)
        if self._after_last is not None and self._feed is not None:
            return self._token(self._after_last)
        return self._token((epoch, 0), begun=False)

    def forget_before(self, epoch: int, index: int) -> None:
        at = self._log.get((epoch, index))
        self._log.forget_before((epoch, index))
        if at is not None:
            self.inner.forget_before(*at)

    def check_resume(self, token: dict, skip_ahead: bool, epoch: int | None = None) -> None:
        if self.worker_restart:
            raise ArgumentValueError(
                "epoch_size with parallel_stream=True cannot resume: each worker's stream carries "
                "on across epochs, and where each stood is not recorded. Drop parallel_stream "
                "(the workers still run the transforms) or epoch_size."
            )
        if token:  # the inner source's passes need not be the loader's epochs
            self.inner.check_resume(token["inner"], skip_ahead)


def fingerprint(dataset: Any, own_only: bool = False) -> Any:
    """What decides the order of ``dataset``'s samples, as plain values: its own
    ``order_fingerprint()`` (files, seed, shuffle, sharding...), else its class (None with
    ``own_only``: a map dataset's length says enough)."""
    own = getattr(dataset, "order_fingerprint", None)
    if own is not None:
        return own()
    if own_only:
        return None
    return {"type": qualified_name(dataset)}


def _copying(state_dict: Any) -> Any:
    """``state_dict`` made to return a copy: a stream may hand out the object it keeps
    updating, and a position noted for later must not move with it."""
    if state_dict is None:
        return None
    return lambda: copy.deepcopy(state_dict())


def _check_sampler_epoch(sampler: Any, saved: Any, epoch: int | None) -> None:
    """A map sampler of this library starts epoch ``epoch`` of the loader at its own epoch
    ``epoch``: a token that says otherwise would resume another epoch's order."""
    if epoch is None or not isinstance(saved, dict) or not isinstance(sampler, MapSampler):
        return
    if "epoch" in saved and saved["epoch"] != epoch:
        raise ArgumentValueError(
            f"the state's source.sampler.epoch is {saved['epoch']!r} but it resumes epoch {epoch}: the "
            "sampler's order would be another epoch's. Load the state as DataLoader.state_dict() "
            "returned it (it was changed), or build the loader afresh and call set_epoch()."
        )


def _chained(first: Iterator[BatchTask], then: Iterator[BatchTask]) -> Iterator[BatchTask]:
    """``first``, then ``then``: a generator, not a chain, so closing it closes the one it is in."""
    yield from first
    yield from then


def known_length(source: Source) -> int | None:
    """``source.length()``, or None where it is unknown or raises (a sampler's ``len()`` that
    raises is left alone until a length is needed, and a position never needs one)."""
    try:
        return source.length()
    except Exception:
        return None


def build_source(dataset: Any, sampler: Any, options: Any) -> Source:
    """The source for ``dataset`` read with ``sampler`` under the loader's ``options``.

    ``sampler`` must already be checked (:func:`checked_sampler`).
    """
    source: Source
    if isinstance(dataset, CallableSource):
        dataset.check_batch_size(sampler.batch_size)
        if options.parallel_stream:
            raise ArgumentValueError(
                "a CallableSource is called by the main process; `parallel_stream=True` does not "
                "apply. Drop parallel_stream."
            )
        source = CallableTasks(dataset, sampler.batch_size)
    elif not is_stream(dataset):
        source = MapSource(sampler)
    elif options.parallel_stream and options.parallel:
        _check_worker_readable(dataset)
        # Shards follow the worker count: "auto" picks it once, from the CPUs (one left for the loop).
        workers = options.num_workers if isinstance(options.num_workers, int) else max(1, available_cpus() - 1)
        source = WorkerStreamSource(dataset, stream_batch_size(dataset, sampler), workers)
    else:
        source = StreamSource(dataset, stream_batch_size(dataset, sampler), options.timeout)
    if options.epoch_size is not None:
        source = FixedEpochs(source, options.epoch_size)
    return source


def _check_worker_readable(dataset: Any) -> None:
    """Refuse ``parallel_stream=True`` for a stream that only the main process can read
    (``reads_in_main_process = True``: a client of a service, such as a Ray Data iterator)."""
    if getattr(dataset, "reads_in_main_process", False):
        raise ArgumentValueError(
            f"{type(dataset).__name__} is read by the main process only (its reader cannot be "
            "copied into worker processes); `parallel_stream=True` would read it in each worker. "
            "Drop parallel_stream: the workers still run the per-sample transforms."
        )


def index_list(indices: Any, index: int) -> list:
    """Batch ``index`` of a map sampler as a list; a sampler that yields single indices (not
    lists of them) is told so here, not by a bare ``TypeError`` from deep in the loader."""
    try:
        return list(indices)
    except TypeError:
        raise ArgumentTypeError(
            f"`sampler` must yield lists of indices (it is a batch sampler); its batch {index} "
            f"is {type(indices).__name__} {indices!r}. Wrap a sampler of single indices so that "
            "it yields lists, or use SequentialSampler/RandomSampler(dataset, batch_size=...)."
        ) from None


def stream_batch_size(dataset: Any, sampler: Any) -> int:
    """Samples per task: the sampler's batch size, or 1 for a stream that yields whole batches
    (``yields_batches = True``: each item is a :class:`~dataloader.Collated`); a
    :class:`~dataloader._stages.streams.BatchSize` that also carries the sampler's ``drop_last``
    to where the stream is cut (and, for whole batches, the size under which one is short)."""
    drop_last = getattr(sampler, "drop_last", False) is True
    if not getattr(dataset, "yields_batches", False):
        return BatchSize(sampler.batch_size, drop_last)
    own = getattr(dataset, "batch_size", None)
    if sampler.batch_size not in (1, own):
        raise ArgumentValueError(
            f"{type(dataset).__name__} yields whole batches of its own batch_size ({own}); got "
            f"StreamSampler(batch_size={sampler.batch_size}). Use StreamSampler() or set the "
            "batch size on the dataset."
        )
    if drop_last and not (isinstance(own, int) and own > 0):
        raise ArgumentValueError(
            f"{type(dataset).__name__} yields whole batches but has no batch_size (it is {own!r}) "
            "to tell a short one by, so drop_last=True cannot drop it. Give the dataset its "
            "batch_size, or drop drop_last."
        )
    return BatchSize(1, drop_last, own if drop_last else 0)
