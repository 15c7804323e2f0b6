"""Serial execution: every stage runs in the calling thread."""

from __future__ import annotations

from typing import Any, Callable, Iterator

from .._failure import Unmade
from .._stages.occupancy import Occupancy
from .._stages.stage import Stage
from .._stages.task import BatchTask, listed
from .._workers.remote_error import not_a_bad_sample
from ..monitor import Recorder


class SerialExecutor(Stage):
    """Makes each task's batch on demand with ``maker``; closing it closes the tasks (the source).

    Each item is ``(batch, task indices, -1)``: which tasks made the batch, and no worker,
    travel with it to :class:`~dataloader._stages.position.Tally`.

    ``owner`` (the loader's pipeline, which owns a fixed-size feed) is kept alive until the
    epoch is closed. A close from another thread while a batch is being made here waits for
    that batch (your code cannot be interrupted) before it closes the tasks.
    """

    def __init__(
        self,
        tasks: Iterator[BatchTask],
        maker: Callable[[BatchTask], Any],
        recorder: Recorder | None = None,
        owner: Any = None,
    ) -> None:
        super().__init__(tasks)
        self._maker = maker
        self._recorder = recorder
        self._owner = owner
        self._occupancy = Occupancy()
        self._timed = hasattr(maker, "timings")  # a BatchMaker notes each batch's stage times

    def __next__(self) -> Any:
        if not self._occupancy.enter():
            raise StopIteration
        try:
            task = next(self.upstream)
            index = task.index
            try:
                batch = self._maker(task)
            except Exception as error:
                if task.chunk is not None:  # a part of a split batch: the rest cannot stand alone
                    raise
                batch = Unmade(error)  # raised at its turn; the epoch goes on past it
            except BaseException as error:  # KeyboardInterrupt, SystemExit: yours, and the epoch's end
                error.add_note(_where(task, self._maker, error))
                raise
            if self._recorder is not None and self._timed:
                recorder, maker = self._recorder, self._maker
                if type(batch) is not Unmade:
                    recorder.batch_made(-1, index, maker.timings)
                if maker.failures:
                    recorder.samples_failed(maker.failures)
            return batch, (index,), -1
        finally:
            self._occupancy.leave()

    def close(self) -> None:
        self.closed = True
        self._occupancy.close(self._teardown, _nothing_to_wake)

    def _teardown(self) -> None:
        try:
            super()._teardown()
        finally:
            self._owner = None


def _where(task: BatchTask, maker: Any, error: BaseException) -> str:
    """The note on a ``BaseException`` that is not an ``Exception``: where it came from, worded as
    a worker's note is (:class:`~dataloader._workers.remote_error.RemoteError`)."""
    if task.indices is not None:
        where = f"while loading indices {listed(task.indices)}"
    else:
        where = f"while making batch {task.index}"
    stage = getattr(maker, "stage", None)
    at = f" (stage: {stage})" if stage else ""
    return f"Raised in the main process (num_workers=0) {where}{at}. {not_a_bad_sample(error)}"


def _nothing_to_wake() -> None:
    """The thread inside is in your code (the dataset, the stream): it returns in its own time."""
