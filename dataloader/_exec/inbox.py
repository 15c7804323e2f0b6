"""Message handling: what the executor does with each message a worker sends."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable

from .._failure import LEFT_OUT, Failure, Unmade
from .._workers.messages import (
    BatchDone,
    BatchFailed,
    BatchLeftOut,
    InitFailed,
    Replies,
    StreamEnded,
    WaitingForRoom,
)

if TYPE_CHECKING:
    from .._transport.receiver import Receiver
    from .._workers.handle import Handle
    from ..monitor import Recorder
    from .dispatch import Dispatcher
    from .releases import Releases
    from .reorder import ReorderBuffer


class Inbox:
    """Handles one epoch's messages from workers.

    A batch or a failure of this epoch goes into the reorder buffer (a failure as an
    :class:`Unmade` that raises at its turn and lets the epoch go on, or, for a part of a split
    batch, as a :class:`Failure` that ends it; a batch whose samples all failed under
    ``on_error="skip"`` as :data:`LEFT_OUT`); one of an earlier epoch (a persistent pool whose
    previous epoch was abandoned) is dropped and its segments released at once. An ended
    stream is skipped in the order, a wait for room is noted for the next wait, and a failed
    ``worker_init_fn`` is raised at once. ``SegmentCreated`` and ``SegmentRetired`` never get
    here: the pool handles them as it receives them.
    """

    def __init__(
        self,
        receiver: Receiver,
        epoch: int,
        reorder: ReorderBuffer,
        dispatcher: Dispatcher,
        releases: Releases,
        recorder: Recorder,
    ) -> None:
        self._receiver = receiver
        self._epoch = epoch
        self._reorder = reorder
        self._dispatcher = dispatcher
        self._releases = releases
        self._recorder = recorder

    def handle(self, worker: Handle, message: Any) -> None:
        """Act on one message from ``worker`` (None: one the pool handled itself)."""
        handler = _HANDLERS.get(type(message))
        if handler is not None:
            handler(self, worker, message)

    def _batch_done(self, worker: Handle, message: BatchDone) -> None:
        if not self._answers_this_epoch(worker, message):
            self._receiver.discard(worker.id, message.payload)  # a previous epoch's leftover
            self._releases.collect()
            return
        start = time.perf_counter()
        payload = message.payload
        self._reorder.put(message.index, self._receiver.decode(worker.id, payload), worker.id)
        self._dispatcher.made()
        end = time.perf_counter()
        times = message.timings
        if times is not None:
            self._dispatcher.measured(times.collated - times.start, payload)
        # Encoding in the worker plus decoding here; time spent queued in the socket
        # while the consumer was busy is not the transport's cost.
        cost = (end - start) + (max(0.0, message.sent - times.collated) if times and message.sent else 0.0)
        self._recorder.batch_made(worker.id, message.index, times, end, cost, payload.nbytes)
        if message.failures:
            self._recorder.samples_failed(message.failures)

    def _batch_left_out(self, worker: Handle, message: BatchLeftOut) -> None:
        if self._answers_this_epoch(worker, message):
            self._reorder.put(message.index, LEFT_OUT, worker.id)
            self._dispatcher.made()
            self._recorder.batch_made(worker.id, message.index, message.timings)
            self._recorder.samples_failed(message.failures)

    def _replies(self, worker: Handle, message: Replies) -> None:
        for reply in message.messages:
            self.handle(worker, reply)

    def _batch_failed(self, worker: Handle, message: BatchFailed) -> None:
        if self._answers_this_epoch(worker, message):
            error = message.error.rebuild()
            self._reorder.put(message.index, Unmade(error) if message.recoverable else Failure(error), worker.id)
            self._dispatcher.made()

    def _stream_ended(self, worker: Handle, message: StreamEnded) -> None:
        if self._answers_this_epoch(worker, message):
            self._dispatcher.stream_ended(worker.id)
            self._reorder.skip(message.index)

    def _waiting_for_room(self, worker: Handle, message: WaitingForRoom) -> None:
        # Sent before it read a release already on its way: that release answers it (and
        # the worker asks again if it frees too little). Granting the pipe here would
        # warn of a fallback that never happens.
        if message.heard >= worker.releases_sent:
            worker.waiting = message  # on the handle: it outlives this epoch

    def _init_failed(self, worker: Handle, message: InitFailed) -> None:
        raise message.error.rebuild()

    def _answers_this_epoch(self, worker: Handle, message: BatchDone | BatchFailed | BatchLeftOut | StreamEnded) -> bool:
        """Strike the task off the worker's list; True (and counted answered) if it is of this epoch."""
        worker.outstanding.pop((message.epoch, message.index), None)
        worker.answered += 1
        if message.epoch != self._epoch:
            return False
        self._dispatcher.answered()
        return True


# By exact type (messages are final dataclasses), on the class rather than on each inbox:
# bound methods stored on the instance would make it a reference cycle.
_HANDLERS: dict[type, Callable[[Inbox, Handle, Any], None]] = {
    BatchDone: Inbox._batch_done,
    BatchFailed: Inbox._batch_failed,
    BatchLeftOut: Inbox._batch_left_out,
    Replies: Inbox._replies,
    StreamEnded: Inbox._stream_ended,
    WaitingForRoom: Inbox._waiting_for_room,
    InitFailed: Inbox._init_failed,
}
