"""Serial execution: every stage runs in the calling thread."""

from __future__ import annotations

from typing import Any, Callable, Iterator

from .._stages.stage import Stage
from .._stages.task import BatchTask
from ..monitor import Recorder


class SerialExecutor(Stage):
    """Makes each task's batch on demand with ``maker``; closing it closes the tasks (the source)."""

    def __init__(
        self,
        tasks: Iterator[BatchTask],
        maker: Callable[[BatchTask], Any],
        recorder: Recorder | None = None,
    ) -> None:
        super().__init__(tasks)
        self._maker = maker
        self._recorder = recorder

    def __next__(self) -> Any:
        task = next(self.upstream)
        batch = self._maker(task)
        if self._recorder is not None:
            self._recorder.batch_made(-1, task.index, getattr(self._maker, "timings", None))
        return batch
