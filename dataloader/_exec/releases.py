"""Releases: segments of the batches the user dropped, on their way back to their workers.

A training step slower than the loader (the usual case) finds the next batch ready, so the
segments dropped since the last batch ride on the task that handing it out makes room for:
one message a batch, not two. What no task takes goes in a ``ReleaseSegments`` of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from .._workers.messages import ReleaseSegments

if TYPE_CHECKING:
    from .._workers.handle import Handle
    from .._workers.pool import WorkerPool
    from .._workers.threads import ThreadWorkerPool


def released_to(worker: Handle) -> None:
    """Count a message that freed segments of ``worker`` (see ``WaitingForRoom.heard``); it
    answers the worker's wait for room, if it was waiting."""
    worker.releases_sent += 1
    worker.waiting = None


class Releases:
    """Segment ids by worker, from the transport's receiver until a message takes them home."""

    def __init__(self, pool: WorkerPool | ThreadWorkerPool, send: Callable[[Handle, Any], None]) -> None:
        self._receiver = pool.receiver
        self._pool = pool
        self._workers = pool.workers
        self._send = send
        # Worker id -> segment ids not yet sent. The dispatcher reads it; only this class writes it.
        self.pending: dict[int, list[int]] = {}

    def collect(self) -> None:
        """Take the segments dropped since the last call from the receiver."""
        retired = self._pool.retired
        for worker_id, segment_ids in self._receiver.drain().items():
            if worker_id not in retired:  # a dead worker's segments went with it
                self.pending.setdefault(worker_id, []).extend(segment_ids)

    def take(self, worker_id: int) -> tuple[int, ...]:
        """The worker's pending segments, to ride on a message to it; once that message is
        sent, the caller calls :func:`released_to`."""
        return tuple(self.pending.pop(worker_id, ()))

    def send_all(self) -> None:
        """Send every worker its pending segments in a ``ReleaseSegments`` of their own."""
        pending = self.pending
        for worker_id in list(pending):
            segment_ids = tuple(pending.pop(worker_id))
            worker = self._workers[worker_id]
            self._send(worker, ReleaseSegments(segment_ids))
            released_to(worker)
