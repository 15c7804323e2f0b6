"""What an epoch's ``worker_processes()`` hands out for a process worker: a view that answers
as ``multiprocessing.Process`` does, even after the pool has reaped the process and closed its
``Process`` object (whose methods then raise ``ValueError``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .pool import WorkerHandle


class WorkerProcess:
    """``pid``, ``name``, ``is_alive()``, ``join(timeout)``, ``exitcode`` and ``terminate()`` of
    one worker process. Once the pool has reaped it, ``is_alive()`` is False, ``join`` returns
    at once and ``exitcode`` is the code it exited with (negative: the signal that ended it)."""

    def __init__(self, handle: WorkerHandle) -> None:
        self._handle = handle
        self.pid = handle.pid
        self.name = handle.process.name

    def is_alive(self) -> bool:
        try:
            return bool(self._handle.process.is_alive())
        except ValueError:  # closed by the pool: it was reaped
            return False

    def join(self, timeout: float | None = None) -> None:
        try:
            self._handle.process.join(timeout)
        except ValueError:
            pass

    @property
    def exitcode(self) -> int | None:
        try:
            return self._handle.process.exitcode
        except ValueError:
            return self._handle.exitcode

    def terminate(self) -> None:
        try:
            self._handle.process.terminate()
        except ValueError:
            pass

    def __repr__(self) -> str:
        return f"<WorkerProcess {self.name} pid={self.pid} exitcode={self.exitcode}>"
