"""Sources: where an epoch's tasks come from. The only module that knows dataset kinds.

Every source offers the same small interface (:class:`Source`): the tasks of
an epoch, their number, the consumer-side stage it needs, ``close()``, and
state hooks. :func:`build_source` picks one from the dataset and the
loader's options; executors receive tasks and never ask what is behind them.

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

import itertools
from dataclasses import replace
from time import perf_counter
from typing import Any, Callable, Iterable, Iterator, TypeVar

from .._validate import check_bool, check_len, check_not_a_class, check_positive_int
from ..callable_source import CallableSource
from ..dataset import StreamDataset
from ..errors import ArgumentTypeError, ArgumentValueError, DataLoaderError
from ..sampler import RandomSampler, SequentialSampler, StreamSampler
from .buffering import BufferedIterator
from .consumer import Reassemble
from .task import BatchTask

T = TypeVar("T")


class Source:
    """The contract between a dataset kind and the pipeline.

    ``worker_batch_size`` is set when each worker reads its own stream (the
    pool hands it to the workers, and the tasks carry no payload);
    ``worker_restart`` when those streams carry on across epochs, so the
    workers must too. ``reads_stream_here`` when making a task reads the
    stream in this process (the monitor times it as the ``read`` stage).
    """

    worker_batch_size: int | None = None
    worker_restart: bool = False
    reads_stream_here: bool = False

    def tasks(self, epoch: int) -> Iterator[BatchTask]:
        """The tasks of ``epoch``, numbered from 0; closing the iterator frees what it opened."""
        raise NotImplementedError

    def length(self) -> int | None:
        """Batches in one epoch, or None when only reading tells (a stream)."""
        return None

    def consumer_stages(self, upstream: Any, collator: Any) -> Any:
        """Wrap the executor in the stages this source's batches need before hand-out."""
        return upstream

    def close(self) -> None:
        """Release what lives across epochs (an open stream); idempotent."""

    def state_dict(self) -> dict:
        """Where this source stands: its kind and its component's own state, if it has one."""
        state: dict = {"source": type(self).__name__}
        component_state = getattr(self._component(), "state_dict", None)
        if component_state is not None:
            state["component"] = component_state()
        return state

    def load_state_dict(self, state: dict) -> None:
        """Restore what :meth:`state_dict` returned (from a source of the same kind)."""
        if state.get("source") != type(self).__name__:
            raise ArgumentValueError(
                f"the state was saved from a {state.get('source')} source; this loader reads a "
                f"{type(self).__name__}. Load it into a loader built over the same kind of dataset."
            )
        if "component" in state:
            load = getattr(self._component(), "load_state_dict", None)
            if load is None:
                raise ArgumentValueError(
                    f"the state holds a {type(self._component()).__name__}'s state, but this "
                    "loader's one has no load_state_dict()."
                )
            load(state["component"])

    def _component(self) -> Any:
        """The user object whose position this source follows (a sampler, a stream)."""
        return None


class MapSource(Source):
    """A map-style dataset: one task per index list the sampler yields, read lazily."""

    def __init__(self, sampler: Any) -> None:
        self.sampler = sampler

    def tasks(self, epoch: int) -> Iterator[BatchTask]:
        for index, indices in enumerate(self.sampler):
            yield BatchTask(epoch, index, indices=index_list(indices, index))

    def length(self) -> int | None:
        return len(self.sampler)

    def _component(self) -> Any:
        return self.sampler


class StreamSource(Source):
    """A stream read by the main process: a fresh ``iter(dataset)`` per epoch, cut into batches.

    With a ``timeout`` the stream is read in a helper thread (:func:`timed_stream`).
    """

    reads_stream_here = True

    def __init__(self, dataset: Any, batch_size: int, timeout: float = 0) -> None:
        self.dataset = dataset
        self.batch_size = batch_size
        self.timeout = timeout

    def tasks(self, epoch: int) -> Iterator[BatchTask]:
        stream: Any = open_stream(self.dataset, epoch)
        timed = timed_stream(stream, self.timeout) if self.timeout > 0 else None
        try:
            for index, samples in enumerate(batches_of(timed or stream, self.batch_size)):
                yield BatchTask(epoch, index, samples=samples)
        finally:
            if timed is not None:
                timed.close()  # stops its reader thread

    def _component(self) -> Any:
        return self.dataset


class WorkerStreamSource(Source):
    """Each worker reads its own copy of the stream; task k asks a worker for its next batch.

    The tasks never end by themselves: the epoch ends when every worker has
    reported the end of its shard.
    """

    def __init__(self, dataset: Any, batch_size: int) -> None:
        self.dataset = dataset
        self.worker_batch_size = batch_size

    def tasks(self, epoch: int) -> Iterator[BatchTask]:
        for index in itertools.count():
            yield BatchTask(epoch, index)

    def _component(self) -> Any:
        return self.dataset


class CallableTasks(Source):
    """Batches from a :class:`~dataloader.CallableSource`, forever.

    ``data_source(batch_size)`` returns ready samples (one task) or
    zero-argument jobs; jobs are split into chunks of ``chunk_size`` that the
    workers run and :class:`~dataloader._stages.consumer.Reassemble` collates
    back in job order.
    """

    def __init__(self, source: CallableSource, batch_size: int) -> None:
        self.source = source
        self.batch_size = batch_size

    def tasks(self, epoch: int) -> Iterator[BatchTask]:
        index = itertools.count()
        for batch in itertools.count():
            items = list(self.source.data_source(self.batch_size))
            if not items or not all(callable(item) for item in items):
                yield BatchTask(epoch, next(index), samples=items)
                continue
            size = self.source.chunk_size or len(items)
            starts = range(0, len(items), size)
            for part, start in enumerate(starts):
                jobs = items[start : start + size]
                yield BatchTask(epoch, next(index), jobs=jobs, chunk=(batch, len(starts), part))

    def consumer_stages(self, upstream: Any, collator: Any) -> Any:
        return Reassemble(upstream, collator)

    def _component(self) -> Any:
        return self.source


class FixedEpochs(Source):
    """Exactly ``epoch_size`` batches per epoch from ``inner``, carrying on across epochs.

    The inner source's tasks form one feed that outlives each epoch; when it
    ends in the middle of an epoch it is opened again (:func:`restarting`) and
    the epoch is completed from the fresh one. A batch split into chunks counts once.
    """

    def __init__(self, inner: Source, epoch_size: int) -> None:
        self.inner = inner
        self.epoch_size = epoch_size
        self.worker_batch_size = inner.worker_batch_size
        # Workers reading their own streams keep them open across epochs, restarting at the end.
        self.worker_restart = inner.worker_batch_size is not None
        self.reads_stream_here = inner.reads_stream_here
        self._feed: Iterator[BatchTask] | None = None

    def tasks(self, epoch: int) -> Iterator[BatchTask]:
        if self._feed is None:
            passes = itertools.count(epoch)  # each fresh pass is a new epoch of the inner source
            self._feed = restarting(
                lambda: self.inner.tasks(next(passes)),
                "the dataset or sampler produced no batch; fixed-size epochs (epoch_size) need "
                "a source that is not empty.",
            )
        done = index = 0
        while done < self.epoch_size:
            task = next(self._feed, None)
            if task is None:  # the feed raised last epoch (the error went to the user): start afresh
                self._feed = None
                return
            yield replace(task, epoch=epoch, index=index)
            index += 1
            done += task.chunk is None or task.chunk[2] == task.chunk[1] - 1

    def length(self) -> int | None:
        return self.epoch_size

    def consumer_stages(self, upstream: Any, collator: Any) -> Any:
        return self.inner.consumer_stages(upstream, collator)

    def close(self) -> None:
        feed, self._feed = self._feed, None
        if feed is not None:
            feed.close()  # type: ignore[attr-defined]
        self.inner.close()

    def _component(self) -> Any:
        return self.inner._component()


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
    elif options.parallel_stream and options.num_workers > 0:
        _check_worker_readable(dataset)
        source = WorkerStreamSource(dataset, stream_batch_size(dataset, sampler))
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


def open_stream(dataset: Any, epoch: int) -> Iterator[Any]:
    """``iter(dataset)`` for ``epoch``: a stream with ``set_epoch`` is told the epoch first,
    so its own shuffles follow the loader's epochs in the main process and in every worker."""
    set_epoch = getattr(dataset, "set_epoch", None)
    if set_epoch is not None:
        set_epoch(epoch)
    make = getattr(type(dataset), "__iter__", None)
    if make is None:
        return iter(dataset)
    stream = make(dataset)
    if not hasattr(type(stream), "__next__"):  # what iter() would refuse, with a bare TypeError
        raise ArgumentTypeError(
            f"{type(dataset).__name__}.__iter__ must return an iterator; got "
            f"{type(stream).__name__}. Return iter(...) of it, or make __iter__ a generator "
            "(yield the samples)."
        )
    return stream


def stream_batch_size(dataset: Any, sampler: Any) -> int:
    """Samples per task: the sampler's batch size, or 1 for a stream that yields whole batches
    (``yields_batches = True``: each item is a :class:`~dataloader.Collated`)."""
    if not getattr(dataset, "yields_batches", False):
        return sampler.batch_size
    own = getattr(dataset, "batch_size", None)
    if sampler.batch_size not in (1, own):
        raise ArgumentValueError(
            f"{type(dataset).__name__} yields whole batches of its own batch_size ({own}); got "
            f"StreamSampler(batch_size={sampler.batch_size}). Use StreamSampler() or set the "
            "batch size on the dataset."
        )
    return 1


def is_stream(dataset: Any) -> bool:
    """True for a stream, False for a map dataset, else a clear error.

    A :class:`~dataloader.StreamDataset` is a stream; so is any other object with ``__iter__``
    but not both ``__getitem__`` and ``__len__`` (a ``torch.utils.data.IterableDataset``,
    say), as PyTorch takes it.
    """
    check_not_a_class("dataset", dataset, "dataset")
    if isinstance(dataset, StreamDataset):
        return True
    if hasattr(dataset, "__getitem__") and hasattr(dataset, "__len__"):
        return False
    if hasattr(dataset, "__iter__"):
        return True
    raise ArgumentTypeError(
        f"`dataset` must be a Dataset (with __getitem__ and __len__) or a StreamDataset (with "
        f"__iter__); got {type(dataset).__name__}, which has neither. Subclass dataloader.Dataset "
        "for random access, or dataloader.StreamDataset for an iterable."
    )


def sampler_from_shortcuts(
    dataset: Any, sampler: Any, batch_size: Any, shuffle: Any, drop_last: Any, seed: int | None
) -> Any:
    """The sampler PyTorch's ``batch_size``/``shuffle``/``drop_last`` describe (None leaves an
    option at PyTorch's default); a clear error when ``sampler`` is given as well."""
    shortcuts = (("batch_size", batch_size), ("shuffle", shuffle), ("drop_last", drop_last))
    given = [f"{name}={value!r}" for name, value in shortcuts if value is not None]
    if sampler is not None:
        raise ArgumentValueError(
            f"`sampler` and {', '.join(given)} were both given; the sampler decides the batches. "
            "Drop the shortcut(s), or drop `sampler` and let them build one, e.g. "
            "RandomSampler(dataset, batch_size=32, drop_last=True)."
        )
    size = 1 if batch_size is None else check_positive_int("batch_size", batch_size)
    shuffled = False if shuffle is None else check_bool("shuffle", shuffle)
    dropped = False if drop_last is None else check_bool("drop_last", drop_last)
    if not is_stream(dataset):
        if shuffled:
            return RandomSampler(dataset, batch_size=size, drop_last=dropped, seed=seed)
        return SequentialSampler(dataset, batch_size=size, drop_last=dropped)
    if shuffled or dropped:
        raise ArgumentValueError(
            f"{', '.join(given)}: a stream has no order to shuffle and no known end to drop a "
            "short batch at. Shuffle inside the stream (ParquetStream and ArrowStream take shuffle= "
            "and shuffle_buffer=), skip a short last batch in your loop, and pass batch_size only."
        )
    return StreamSampler(batch_size=size)


def checked_sampler(dataset: Any, sampler: Any) -> Any:
    """``sampler``, or the default one, after checking that it suits the dataset's kind."""
    stream = is_stream(dataset)
    if sampler is None:
        return StreamSampler(batch_size=1) if stream else SequentialSampler(dataset)
    stream_sampler = isinstance(sampler, StreamSampler) or isinstance(
        getattr(sampler, "sampler", None), StreamSampler
    )
    if stream and not stream_sampler:
        raise ArgumentTypeError(
            f"a StreamDataset needs a StreamSampler; got {type(sampler).__name__}. "
            "Use sampler=StreamSampler(batch_size=...)."
        )
    if not stream and stream_sampler:
        raise ArgumentTypeError(
            "a map-style Dataset needs a map sampler; got StreamSampler. Use "
            "SequentialSampler(dataset, batch_size=...) or RandomSampler(dataset, batch_size=...)."
        )
    check_not_a_class("sampler", sampler, "sampler")
    if not hasattr(sampler, "__iter__"):
        raise ArgumentTypeError(
            f"`sampler` must be iterable (yielding lists of indices); got {type(sampler).__name__}."
        )
    if not stream:  # len() would refuse a negative length only when called, at iter(loader)
        _check_length("dataset", dataset)
        _check_length("sampler", sampler)
    return sampler


def _check_length(name: str, value: Any) -> None:
    """:func:`check_len`, leaving alone a ``__len__`` that raises: the loader may never need
    that length (it never measures the dataset of a sampler you gave, nor, with
    ``epoch_size``, the sampler)."""
    try:
        check_len(name, value)
    except DataLoaderError:
        raise
    except Exception:
        pass


def batches_of(stream: Iterator[T], size: int) -> Iterator[list[T]]:
    """Cut ``stream`` into lists of ``size``; the last may be shorter, and nothing is read after it."""
    while True:
        batch = list(itertools.islice(stream, size))
        if batch:
            yield batch
        if len(batch) < size:
            return


def restarting(open_: Callable[[], Iterable[T]], empty_message: str) -> Iterator[T]:
    """Everything ``open_()`` yields, opened again each time it ends, forever.

    A fresh pass that yields nothing would loop forever: it raises
    :class:`~dataloader.errors.DataLoaderError` with ``empty_message`` instead.
    """
    while True:
        produced = False
        for item in open_():
            produced = True
            yield item
        if not produced:
            raise DataLoaderError(empty_message)


def timed_reads(tasks: Iterator[BatchTask], record: Callable[[float, float], None]) -> Iterator[BatchTask]:
    """``tasks``, the time spent making each one (reading the stream here) given to
    ``record(start, end)``; closing this closes ``tasks``."""
    try:
        while True:
            start = perf_counter()
            task = next(tasks, None)
            if task is None:
                return
            record(start, perf_counter())
            yield task
    finally:
        close = getattr(tasks, "close", None)
        if close is not None:
            close()


def timed_stream(stream: Iterator[Any], timeout: float) -> BufferedIterator:
    """Iterate ``stream`` in a helper thread so ``next()`` can give up after ``timeout`` s.

    The main thread is never interrupted: it waits with a bound and raises
    :class:`~dataloader.LoaderTimeoutError` when nothing came. ``close()``
    stops the thread at its next sample (a stream blocked forever inside
    ``next()`` keeps a daemon thread until the process exits: Python cannot
    interrupt it).
    """
    return BufferedIterator(
        stream,
        buffer_size=64,
        timeout=timeout,
        name="dataloader-stream-reader",
        timeout_message=(
            f"DataLoader timeout: the stream produced no sample within {timeout:g} s. "
            "The dataset's __iter__ is blocked or very slow; raise `timeout` or check the "
            "stream's source."
        ),
    )
