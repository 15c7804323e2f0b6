"""A worker process's socket, carrying protocol messages.

``Connection.send`` pickles with multiprocessing's ``ForkingPickler``, which
copies its table of reducers on every call. The protocol's messages need none
of those reducers (segment descriptors travel beside them, through
:mod:`.fd_passing`), so plain pickle carries them.

The messages sent for every batch (:class:`RunTask`, :class:`BatchDone`,
:class:`ReleaseSegments`, and for small batches :class:`RunTasks` and
:class:`Replies`, which carry several) travel as a tuple of built-in values
tagged by kind and are rebuilt on arrival. Pickling a tree of
dataclasses looks up every class by name and builds every instance from a
state dict: 7-11 us a message each way, against 1-3 us for the tuple plus the
rebuild. The other messages, and tasks or batches of unusual kinds, are
pickled as they are; both ends must be a :class:`Wire`.
"""

from __future__ import annotations

import collections
import pickle
import socket
import struct
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from .._stages.batch import StageTimes
from .._stages.task import BatchTask
from .._transport.codec import InlineBatch, SharedBatch
from .._transport.skeleton import Plain
from .messages import BatchDone, ReleaseSegments, Replies, RunTask, RunTasks

_ONE_PIECE = 16384  # payloads up to this size are written with their header, in one piece

# Tags of the compact forms. A message object is never a tuple, so a tuple is one of these.
_TASK, _SHARED, _INLINE, _RELEASE, _TASKS, _REPLIES = range(6)


class Wire:
    """Sends and receives messages over ``conn``; the other end must be a :class:`Wire` too.

    ``never_block`` (the main process's end): :meth:`send` never waits for the worker to read.
    What the socket's buffer cannot take at once waits here, in order, and :meth:`flush` writes
    more of it whenever the socket can take it (the executor's ``poll`` says when). A blocking
    send could wait forever: a worker blocked sending its batches back reads nothing until
    the main process reads them, which it does not while it is blocked sending. A group of
    tasks with long index lists one way, and batches carried inside the messages the other
    way, fill both sockets' buffers (about 200 KiB each on Linux) at once.
    """

    def __init__(self, conn: Connection, never_block: bool = False) -> None:
        self._conn = conn
        self._send_bytes = conn.send_bytes
        self._recv_bytes = conn.recv_bytes
        self._never_block = never_block
        self._unsent: collections.deque[memoryview] = collections.deque()

    def send(self, message: Any) -> None:
        payload = pickle.dumps(_compact(message), protocol=pickle.HIGHEST_PROTOCOL)
        if not self._never_block:
            self._send_bytes(payload)
            return
        self._unsent.extend(map(memoryview, _framed(payload)))
        self.flush()

    @property
    def unsent(self) -> bool:
        """Whether some of what was sent waits for room in the socket (``never_block`` only)."""
        return bool(self._unsent)

    def flush(self) -> bool:
        """Write what waits, as much as the socket takes without blocking; True once all is
        written. Raises ``OSError`` (a broken pipe, say) where the worker is gone."""
        unsent = self._unsent
        if not unsent:
            return True
        # A socket object over the connection's own descriptor, for send()'s flags; detached
        # after, so the descriptor stays the connection's (no second one to close or to leak).
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, fileno=self._conn.fileno())
        try:
            while unsent:
                view = unsent[0]
                written = sock.send(view, socket.MSG_DONTWAIT)
                if written < len(view):
                    unsent[0] = view[written:]
                    return False
                unsent.popleft()
        except BlockingIOError:
            return False
        finally:
            sock.detach()
        return True

    def recv(self) -> Any:
        received = pickle.loads(self._recv_bytes())
        return _expand(received) if type(received) is tuple else received

    def fileno(self) -> int:
        return self._conn.fileno()

    def close(self) -> None:
        self._unsent.clear()
        self._conn.close()


def _framed(payload: bytes) -> tuple[bytes, ...]:
    """``payload`` behind the length header ``Connection.send_bytes`` writes, so that the other
    end's ``recv_bytes`` reads them as one message: in one piece where small (one system call),
    else in two (no copy of a large payload)."""
    if len(payload) > 0x7FFFFFFF:
        return struct.pack("!iQ", -1, len(payload)), payload
    if len(payload) > _ONE_PIECE:
        return struct.pack("!i", len(payload)), payload
    return (struct.pack("!i", len(payload)) + payload,)


def _compact(message: Any) -> Any:
    """``message`` as a tagged tuple of built-in values where it has such a form, else itself."""
    kind = type(message)
    if kind is RunTask:
        task = message.task
        if _plain(task):
            return (_TASK, task.epoch, task.index, _indices_out(task.indices), message.released)
    elif kind is RunTasks:
        tasks = message.tasks
        epoch = tasks[0].epoch
        if all(_plain(task) and task.epoch == epoch for task in tasks):
            return (_TASKS, epoch, [(task.index, _indices_out(task.indices)) for task in tasks], message.released)
    elif kind is Replies:
        return (_REPLIES, [_compact(reply) for reply in message.messages])
    elif kind is BatchDone and not message.failures:  # with failures: pickled whole (rare)
        payload, timings = message.payload, message.timings
        times = None if timings is None else tuple(timings)
        meta = payload.meta if isinstance(payload, (SharedBatch, InlineBatch)) else None
        plain = (meta.number, meta.shapes, meta.skeleton) if type(meta) is Plain else meta
        epoch, index, sent = message.epoch, message.index, message.sent
        if type(payload) is SharedBatch:
            return (_SHARED, epoch, index, payload.segment_id, plain, payload.layout, times, sent)
        if type(payload) is InlineBatch:
            return (_INLINE, epoch, index, plain, payload.buffers, times, sent)
    elif kind is ReleaseSegments:
        return (_RELEASE, message.segment_ids)
    return message


def _indices_out(indices: Any) -> Any:
    """A list as it is; our samplers' int64 array as its bytes (0.2 us to pickle against 2.5
    for 256 ints as a list, and the worker makes the ints only where the dataset reads them)."""
    return indices.tobytes() if type(indices) is np.ndarray else indices


def _indices_in(indices: Any) -> Any:
    return np.frombuffer(indices, np.int64) if type(indices) is bytes else indices


def _plain(task: BatchTask) -> bool:
    """A map dataset's task: an epoch, an index and the sample indices, nothing else."""
    return task.samples is None and task.jobs is None and task.chunk is None and not task.skip and not task.bad


def _expand(compact: tuple) -> Any:
    """The message a tuple from :func:`_compact` stands for."""
    tag = compact[0]
    if tag == _TASK:
        _, epoch, index, indices, released = compact
        return RunTask(BatchTask(epoch, index, _indices_in(indices)), released)
    if tag == _TASKS:
        _, epoch, tasks, released = compact
        return RunTasks(tuple(BatchTask(epoch, index, _indices_in(indices)) for index, indices in tasks), released)
    if tag == _REPLIES:
        return Replies(tuple(_expand(reply) if type(reply) is tuple else reply for reply in compact[1]))
    if tag == _RELEASE:
        return ReleaseSegments(compact[1])
    if tag == _SHARED:
        _, epoch, index, segment_id, meta, layout, times, sent = compact
        payload: SharedBatch | InlineBatch = SharedBatch(segment_id, _meta(meta), layout)
    else:
        _, epoch, index, meta, buffers, times, sent = compact
        payload = InlineBatch(_meta(meta), buffers)
    return BatchDone(epoch, index, payload, None if times is None else StageTimes(*times), sent)


def _meta(meta: tuple | bytes) -> Plain | bytes:
    return Plain(*meta) if type(meta) is tuple else meta
