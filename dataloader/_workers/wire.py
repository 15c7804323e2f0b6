"""A worker process's socket, carrying protocol messages.

``Connection.send`` pickles with multiprocessing's ``ForkingPickler``, which
copies its table of reducers on every call. The protocol's messages need none
of those reducers (segment descriptors travel beside them, with
``send_handle``), so plain pickle carries them, at about two thirds of the
cost: two messages a batch, in both processes, add up.
"""

from __future__ import annotations

import pickle
from multiprocessing.connection import Connection
from typing import Any


class Wire:
    """Sends and receives messages over ``conn``; the other end must be a :class:`Wire` too."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._send_bytes = conn.send_bytes
        self._recv_bytes = conn.recv_bytes

    def send(self, message: Any) -> None:
        self._send_bytes(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))

    def recv(self) -> Any:
        return pickle.loads(self._recv_bytes())

    def fileno(self) -> int:
        return self._conn.fileno()

    def close(self) -> None:
        self._conn.close()
