"""Serial execution: every stage runs in the calling thread."""

from __future__ import annotations

from typing import Any, Callable, Iterator

from .._stages.task import BatchTask
from ..monitor import Recorder


class SerialExecutor:
    """Makes each task's batch on demand with ``maker``."""

    def __init__(
        self,
        tasks: Iterator[BatchTask],
        maker: Callable[[BatchTask], Any],
        on_close: Callable[[], None] | None = None,
        recorder: Recorder | None = None,
    ) -> None:
        self._tasks = tasks
        self._maker = maker
        self._on_close = on_close
        self._recorder = recorder

    def __iter__(self) -> "SerialExecutor":
        return self

    def __next__(self) -> Any:
        task = next(self._tasks)
        batch = self._maker(task)
        if self._recorder is not None:
            self._recorder.batch_made(-1, task.index, getattr(self._maker, "timings", None))
        return batch

    def close(self) -> None:
        close = getattr(self._tasks, "close", None)
        if close is not None:
            close()
        if self._on_close is not None:
            self._on_close()
            self._on_close = None
