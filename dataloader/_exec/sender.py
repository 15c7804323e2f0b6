"""Sending to workers: a dead worker's last words are read before its death is reported."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, Callable

from ..errors import WorkerDiedError

if TYPE_CHECKING:
    from .._workers.handle import Handle
    from .._workers.pool import WorkerPool
    from .._workers.threads import ThreadWorkerPool


class Sender:
    """Sends messages to the pool's workers.

    If the worker is gone, what it said before dying is read first: a worker whose
    ``worker_init_fn`` failed reports it and exits, and that report, not "worker died",
    is the error to raise.
    """

    def __init__(self, pool: WorkerPool | ThreadWorkerPool) -> None:
        self._pool = pool
        self._drain: Callable[[], Any] = lambda: None

    def reads_last_words_with(self, drain: Callable[[Handle], None]) -> None:
        """Read a dead worker's messages with ``drain``. Held weakly: the waiter it belongs to
        holds what holds this sender, and a cycle would keep the epoch's batches (in the reorder
        buffer) alive until the next garbage collection."""
        self._drain = weakref.WeakMethod(drain)

    def send(self, worker: Handle, message: Any) -> None:
        try:
            self._pool.send(worker, message)
        except (WorkerDiedError, OSError):
            drain = self._drain()
            if drain is not None:
                drain(worker)
            raise
