"""Serial execution: every stage runs in the calling thread."""

from __future__ import annotations

from typing import Any, Callable, Iterator

from .._stages.task import BatchTask


class SerialExecutor:
    """Makes each task's batch on demand with ``maker``."""

    def __init__(
        self, tasks: Iterator[BatchTask], maker: Callable[[BatchTask], Any], on_close: Callable[[], None] | None = None
    ) -> None:
        self._tasks = tasks
        self._maker = maker
        self._on_close = on_close

    def __iter__(self) -> "SerialExecutor":
        return self

    def __next__(self) -> Any:
        return self._maker(next(self._tasks))

    def close(self) -> None:
        close = getattr(self._tasks, "close", None)
        if close is not None:
            close()
        if self._on_close is not None:
            self._on_close()
            self._on_close = None
