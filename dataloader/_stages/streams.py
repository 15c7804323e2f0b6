"""Reading a stream in the main process or a worker: batches cut from it, a fresh pass each
time it ends (fixed-size epochs), a helper thread that bounds the wait for it, and the stream's
own position at every batch boundary (for :meth:`DataLoader.state_dict`)."""

from __future__ import annotations

import itertools
import types
from time import perf_counter
from typing import Any, Callable, Iterable, Iterator, TypeVar

from ..dataset import Collated
from ..errors import ArgumentTypeError, ArgumentValueError, DataLoaderError
from .buffering import BufferedIterator
from .task import BatchTask

T = TypeVar("T")


def open_stream(dataset: Any, epoch: int, state: Any = None, reweight: bool = False) -> Iterator[Any]:
    """``iter(dataset)`` for ``epoch``: a stream with ``set_epoch`` is told the epoch first,
    so its own shuffles follow the loader's epochs in the main process and in every worker.
    ``state`` (from the stream's ``state_dict()``) is loaded next, so the iterator starts there
    (``reweight``: a mix's state saved under other weights, loaded with the mix's own)."""
    set_epoch = getattr(dataset, "set_epoch", None)
    if set_epoch is not None:
        set_epoch(epoch)
    if reweight:
        dataset.load_state_dict(state, reweight=True)
    elif state is not None:
        dataset.load_state_dict(state)
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


class BatchSize(int):
    """Samples per task cut from a stream (it is that int), and what becomes of a short batch.

    ``drop_last``: a last batch of fewer samples is dropped, not handed out. ``whole``: for a
    stream of whole batches (``yields_batches``: each item a :class:`~dataloader.Collated`, one
    per task, so the int is 1), the dataset's batch size; with ``drop_last`` a ``Collated`` of
    fewer samples (a stream's last) is dropped. It travels as it is to the workers that read
    their own stream (``parallel_stream=True``).
    """

    drop_last: bool
    whole: int

    def __new__(cls, size: int, drop_last: bool = False, whole: int = 0) -> "BatchSize":
        made = super().__new__(cls, size)
        made.drop_last, made.whole = drop_last, whole
        return made


def _pulled(stream: Iterator[T]) -> Iterator[T]:
    """``stream``, safe to hand to ``itertools.islice`` and ``for`` (which call ``iter()`` on it,
    islice at every batch): a built-in iterator (a generator, say) as it is; any other pulled by
    ``map(next, ...)``, so its ``__iter__`` (which may reset a stream that is its own iterator) is
    never called again. No Python frame per sample, and no sample compared with a sentinel
    (NumPy arrays refuse that); the map ends at the stream's ``StopIteration``."""
    if isinstance(getattr(type(stream), "__iter__", None), types.WrapperDescriptorType):
        return stream  # a C-level __iter__ returns the iterator itself
    return map(next, itertools.repeat(stream))


def _full_wholes(stream: Iterator[T], size: int) -> Iterator[T]:
    """``stream`` without its whole batches of fewer samples than ``size.whole``, where ``size``
    is a :class:`BatchSize` with ``drop_last`` and ``whole`` (else ``stream`` as it is)."""
    whole = getattr(size, "whole", 0)
    if not (whole and getattr(size, "drop_last", False)):
        return stream

    def short(item: Any) -> bool:
        return isinstance(item, Collated) and item.size < whole

    return itertools.filterfalse(short, stream)


def batches_of(stream: Iterator[T], size: int, read: Callable[[int], None] | None = None) -> Iterator[list[T]]:
    """Cut ``stream`` into lists of ``size``; the last may be shorter (dropped where ``size`` is a
    :class:`BatchSize` with ``drop_last``), and nothing is read after it. ``read(k)`` is called
    once ``k`` batches have been read (first with 0, before any), before batch ``k - 1`` is
    yielded: where the stream stands between batches, at no cost per sample."""
    count = 0
    drop = getattr(size, "drop_last", False)
    stream = _full_wholes(_pulled(stream), size)
    if read is not None:
        read(0)
    while True:
        batch = list(itertools.islice(stream, size))
        if batch and not (drop and len(batch) < size):
            count += 1
            if read is not None:
                read(count)
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
        _pulled(stream),  # the thread's `for` would call iter() on it again
        buffer_size=64,
        timeout=timeout,
        name="dataloader-stream-reader",
        timeout_message=(
            f"DataLoader timed out after {timeout:g} seconds: the stream produced no sample. "
            "The dataset's __iter__ is blocked or very slow; raise `timeout` or check the "
            "stream's source."
        ),
    )


class _Mark:
    """A stream's position (its ``state_dict()``) between two batches."""

    __slots__ = ("state",)

    def __init__(self, state: Any) -> None:
        self.state = state


def marked(stream: Iterator[Any], size: int, capture: Callable[[], Any]) -> Iterator[Any]:
    """The samples of ``stream`` with a :class:`_Mark` of ``capture()`` before the first batch of
    ``size`` and after every batch. Run it where the stream is read ahead (the helper thread of
    :func:`timed_stream`), so each mark is the position exactly at the boundary, not wherever
    reading ahead has got to; read in place, :func:`batches_of`'s ``read`` does the same. A
    :class:`BatchSize` with ``drop_last`` puts no mark after a short last batch."""
    drop = getattr(size, "drop_last", False)
    stream = _full_wholes(_pulled(stream), size)
    yield _Mark(capture())
    while True:
        read = 0
        for sample in itertools.islice(stream, size):
            read += 1
            yield sample
        if read == 0 or (drop and read < size):  # no mark after them: the samples go unused
            return
        yield _Mark(capture())
        if read < size:
            return


def batches_between_marks(items: Iterable[Any], note: Callable[[int, Any], None]) -> Iterator[list]:
    """The batches of :func:`marked` items; ``note(k, position)`` gets the stream's position
    before batch ``k`` (counted from 0), before batch ``k - 1`` is yielded."""
    batch: list = []
    count = 0
    for item in items:
        if type(item) is not _Mark:
            batch.append(item)
            continue
        note(count, item.state)
        if count:
            yield batch
            batch = []
        count += 1


def check_stream_resume(owner: Any, holds_position: bool, must_reread: bool, skip_ahead: bool) -> None:
    """Refuse a resume of ``owner`` (a stream, a callable source) it cannot do, saying what to add."""
    name = getattr(owner, "__name__", None) or type(owner).__name__  # a function's own name
    if holds_position and not hasattr(owner, "load_state_dict"):
        raise ArgumentValueError(
            f"the state holds the position of a stream with state_dict(), but this loader's {name} "
            "has no load_state_dict(). Resume with the stream that saved it."
        )
    refused = getattr(owner, "resume_refused", None)
    if must_reread and refused:
        raise ArgumentValueError(refused)
    if must_reread and not skip_ahead:
        raise ArgumentValueError(
            f"{name} has no state_dict()/load_state_dict(), so the loader cannot put it back where "
            "the state was taken. Give it both: state_dict() returns the position of the "
            "iterator its __iter__ returned last, and load_state_dict(state) makes the next "
            "__iter__ start there. Or call load_state_dict(state, skip_ahead=True) to re-read "
            "the epoch from its start and discard what was handed out (exact only if the stream "
            "reads the same samples each time it reads an epoch)."
        )
