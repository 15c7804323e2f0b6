"""What ``iter(loader)`` returns: one epoch, closable, a context manager.

A ``next()`` never ends without saying why. The epoch's own end is ``StopIteration``; an epoch
ended by someone else is a :class:`~dataloader.DataLoaderError` that says who: another thread
that called ``close()`` while ``next()`` waited (that call only), or the loader, when a newer
``iter(loader)`` or ``loader.close()`` took away the persistent workers or the fixed-size feed
the epoch ran on, or ``load_state_dict()`` moved the loader elsewhere (every later call too).
"""

from __future__ import annotations

import threading
from contextlib import contextmanager, nullcontext
from time import perf_counter
from typing import Any, Callable, Iterator

from .._failure import Unmade
from .._stages.occupancy import Stopped
from .._stages.stage import Stage
from ..errors import DataLoaderError
from ..monitor import Recorder, Stats


class LoaderIterator(Stage):
    """One epoch of batches.

    ``close()`` (or leaving a ``with`` block, or garbage collection) stops the
    epoch's workers and threads and frees its shared memory; it is idempotent,
    and safe from any thread. ``buffer`` is the epoch's buffer stage, if any,
    for :meth:`allow_buffering`.
    """

    def __init__(
        self,
        stages: Any,
        length: int | None,
        position: Any,
        recorder: Recorder | None = None,
        buffer: Any = None,
        epoch: int = 0,
        on_close: Callable[["LoaderIterator", bool], None] | None = None,
        workers: Callable[[], list[Any]] | None = None,
    ) -> None:
        super().__init__(stages)
        self._workers = workers  # the executor's worker_processes, where the epoch has workers
        self._on_close = on_close  # told once, when the epoch closes: (this, whether it ran out)
        self._length = length
        self.position = position  # counts what was handed out, for DataLoader.state_dict()
        self._buffer = buffer
        self.recorder = recorder or Recorder(0)
        self.epoch = epoch
        self._lock = threading.Lock()
        self._inside: set[int] = set()  # threads in next()
        self._cut_short: set[int] = set()  # of those, the ones another thread's close() came to
        self._ended_by: tuple[str, str, int | None] | None = None  # see end()

    def __next__(self) -> Any:
        batch = self._next()
        if type(batch) is Unmade:
            # Raised from a frame that does not hold the iterator: a traceback the caller
            # keeps (a notebook keeps the last one) must not keep the epoch and its workers up.
            error = batch.error
            del self, batch
            raise error  # type: ignore[misc]
        return batch

    def _next(self) -> Any:
        me = threading.get_ident()
        with self._lock:
            if self.closed:
                self._raise_if_ended(None)
                raise StopIteration
            self._inside.add(me)
        start = perf_counter()
        try:
            batch = next(self.upstream)
            while type(batch) is Unmade:  # its turn is its hand-out; its error, if any, raised
                self.position.unmade()
                if batch.error is not None:
                    break
                batch = next(self.upstream)
        except BaseException as error:  # the end of the epoch (StopIteration) or any failure
            cut_short = self._leave(me)
            try:
                if isinstance(error, StopIteration):
                    self.recorder.epoch_ended()  # may raise TooManyBadSamplesError
            finally:
                self._close(None, own_end=True, ran_out=isinstance(error, StopIteration))
            if cut_short:
                self._raise_cut_short(None if isinstance(error, (Stopped, StopIteration)) else error)
            if isinstance(error, Stopped):  # closed by the epoch's own end in another next()
                raise StopIteration from None
            raise
        if self._leave(me):
            del batch  # the epoch was closed while it came: it is not handed out
            self._raise_cut_short(None)
        if type(batch) is Unmade:
            return batch
        self.position.handed_out()
        self.recorder.waited(start, perf_counter())
        return batch

    def __len__(self) -> int:
        if self._length is None:
            raise TypeError("this epoch reads a stream: its length is unknown")
        return self._length

    def close(self) -> None:
        """Stop this epoch and release what it holds."""
        self._close(None)

    def end(self, reason: str, shared: str, newer: int | None = None) -> None:
        """End this epoch because the loader takes away the ``shared`` things it runs on
        (``reason``: "superseded" by epoch ``newer``, "closed" by ``loader.close()``, or
        "replaced" by ``loader.load_state_dict()``); every later ``next()`` raises a
        :class:`DataLoaderError` that says so."""
        self._close((reason, shared, newer))

    def _close(
        self, ended_by: tuple[str, str, int | None] | None, own_end: bool = False, ran_out: bool = False
    ) -> None:
        """Close once. Unless this is the epoch's own end (exhausted, or failed, in a ``next()``),
        the other threads in ``next()`` wake (the stages see to it) and raise why."""
        me = threading.get_ident()
        with self._lock:
            if self.closed:
                return
            self.closed = True
            self._ended_by = ended_by
            if not own_end:
                self._cut_short |= self._inside - {me}
        try:
            self._teardown()
        finally:
            self.recorder.finish()
            if self._on_close is not None:
                self._on_close(self, ran_out)

    def _leave(self, me: int) -> bool:
        """Leave ``next()``; True if another thread closed the epoch meanwhile."""
        with self._lock:
            self._inside.discard(me)
            if me not in self._cut_short:
                return False
            self._cut_short.discard(me)
            return True

    def _raise_cut_short(self, cause: BaseException | None) -> None:
        """Raise why the ``next()`` in progress ends without its batch."""
        self._raise_if_ended(cause)
        raise DataLoaderError(
            f"epoch {self.epoch}'s iterator was closed from another thread while next() was waiting "
            "for a batch: the epoch ended early, without this batch. If that thread stops the loop "
            "on purpose, catch DataLoaderError here; otherwise close the iterator from the thread "
            "that iterates it."
        ) from cause

    def _raise_if_ended(self, cause: BaseException | None) -> None:
        if self._ended_by is None:
            return
        reason, shared, newer = self._ended_by
        if reason == "replaced":
            raise DataLoaderError(
                f"epoch {self.epoch}'s iterator was ended by loader.load_state_dict(), which moved the "
                "loader to the state's position; call iter(loader) to run on from there."
            ) from cause
        if reason == "superseded":
            raise DataLoaderError(
                f"epoch {self.epoch}'s iterator was superseded by a newer iter(loader) (epoch "
                f"{newer}) on the same {shared}; finish or close one epoch before starting the next."
            ) from cause
        raise DataLoaderError(
            f"epoch {self.epoch}'s iterator was ended by loader.close(), which stops the {shared} it "
            "ran on; close the loader after its last epoch, or start a new epoch with iter(loader)."
        ) from cause

    @contextmanager
    def allow_buffering(self) -> Iterator[None]:
        """Let the buffer work ahead inside the block (``buffer_on_request=True``).

        Use it around a step that releases the GIL (a native call, a GPU
        kernel) so that buffering happens while the step cannot use the CPU.
        """
        with self._buffer.allow_buffering() if self._buffer is not None else nullcontext():
            yield

    def worker_processes(self) -> list[Any]:
        """This epoch's workers, to join or inspect: for a process, an object with ``pid``,
        ``is_alive()``, ``join()`` and ``exitcode`` as ``multiprocessing.Process`` has them
        (answering after the epoch reaped it too); for a thread, its ``threading.Thread``.
        Empty without workers."""
        return [] if self._workers is None else self._workers()

    def stats(self) -> Stats:
        """Timings of this epoch so far, with a verdict on the bottleneck."""
        return self.recorder.snapshot()

    def __enter__(self) -> "LoaderIterator":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass
