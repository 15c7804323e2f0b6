"""Overflow: a worker whose shared memory is full sends its batch through the socket instead."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable

from .._workers.messages import Overflow, WaitingForRoom

if TYPE_CHECKING:
    from .._workers.handle import Handle

logger = logging.getLogger("dataloader")


class OverflowGrants:
    """Lets workers waiting for shared-memory room send their batch inline, with a warning.

    A worker waits for room when its budget is full of batches the user still holds; if the
    main process is waiting for that worker too, both would wait forever. The first grant of
    an epoch is logged as a warning that says what to change, later ones at debug level.
    """

    def __init__(self, workers: list[Handle], send: Callable[[Handle, Any], None]) -> None:
        self._workers = workers
        self._send = send
        self._granted = 0

    def grant(self) -> None:
        """Send ``Overflow`` to every worker waiting for room."""
        for worker in self._workers:
            waiting = worker.waiting
            if waiting is None:
                continue
            worker.waiting = None
            self._granted += 1
            self._warn(worker.id, waiting)
            self._send(worker, Overflow())

    def _warn(self, worker_id: int, waiting: WaitingForRoom) -> None:
        log = logger.warning if self._granted == 1 else logger.debug  # once per epoch
        if waiting.needed > waiting.budget:
            log(
                "DataLoader worker %d: a batch of %.1f MiB is larger than its shared-memory "
                "budget of %.1f MiB; sending batches through a pipe instead (slower). Raise "
                "shm_budget to at least %d bytes (it is split between the workers).",
                worker_id, waiting.needed / 2**20, waiting.budget / 2**20,
                2 * waiting.needed * len(self._workers),
            )
        else:
            log(
                "DataLoader worker %d: its shared-memory budget is full of batches the training "
                "loop still holds; sending batches through a pipe instead (slower). Drop "
                "references to old batches, or raise shm_budget.",
                worker_id,
            )
