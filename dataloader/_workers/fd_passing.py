"""A file descriptor passed from a worker to the main process over its connection.

Both ends are ours, so no acknowledgement byte travels back: the standard
library's ``send_handle`` waits for one on some Pythons and not on others
(``multiprocessing.reduction.ACKNOWLEDGE``, gone in 3.14, where it always
waits), and a receiver that guessed wrong would hang the worker or leave a
stray byte in the stream.
"""

from __future__ import annotations

import array
import os
import resource
import socket
from multiprocessing.connection import Connection

from ..errors import SharedMemoryError

_ITEM = array.array("i").itemsize


def send_descriptor(conn: Connection, fd: int) -> None:
    """Send ``fd`` over ``conn`` (a Unix socket connection) with one byte of payload."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, fileno=conn.fileno())
    try:
        socket.send_fds(sock, [b"F"], [fd])
    finally:
        sock.detach()  # the socket stays the connection's


def receive_descriptor(conn: Connection, sender: str) -> int:
    """The descriptor :func:`send_descriptor` sent over ``conn``, a new one in this process.

    Raises ``EOFError`` when the sender's end closed, and :class:`SharedMemoryError` naming
    ``sender`` and the fix when the descriptor was dropped for want of a free one here.
    """
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, fileno=conn.fileno())
    try:
        message, ancillary, flags, _ = sock.recvmsg(1, socket.CMSG_SPACE(_ITEM))
    finally:
        sock.detach()
    if not message and not ancillary:
        raise EOFError
    fds = [
        fd
        for level, kind, data in ancillary
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS
        for fd in array.array("i", data[: len(data) - len(data) % _ITEM])
    ]
    if len(fds) == 1 and not flags & socket.MSG_CTRUNC:
        return fds[0]
    for fd in fds:
        os.close(fd)
    raise SharedMemoryError(
        f"the main process has no file descriptor free to receive a shared-memory segment from "
        f"{sender}; its limit is {resource.getrlimit(resource.RLIMIT_NOFILE)[0]} (ulimit "
        "-n). The loader keeps no descriptor per batch, so other open files take them: raise "
        "the limit (ulimit -n 4096 in the shell, or resource.setrlimit(resource.RLIMIT_NOFILE, "
        "(4096, hard)) in the program), or close files you no longer need."
    )
