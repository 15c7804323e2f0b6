"""What the executor knows of one worker, whether a process or a thread."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# How long a pool waits, once it has asked its workers to stop, before it kills a process that
# is still running (a thread cannot be killed: the pool stops waiting and closes its channels;
# the thread ends when it returns). An idle worker stops in milliseconds; the grace lets one
# finish the batch in hand. 0.5 s keeps close(), Ctrl-C and a script's exit within about 1 s
# even when a worker stuck in user code has to be killed after it (the shutdown tests allow 1 s
# plus a margin: NOTICE_WITHIN in tests/_workers/test_shutdown.py), and waiting longer would not
# unstick such a worker. Process and thread pools share it, so both stop on the same clock.
STOP_GRACE = 0.5

# How long the main process waits for a worker whose channel broke (EOF, a reset) or whose exit
# sentinel fired to exit before it kills it: such a worker is gone or going, whatever its
# process says yet (it may be stuck in an atexit handler or a C destructor, or something in it
# closed its descriptors). A normal death is seen well within it; a core dump may take longer
# and is cut short, but a main process that waited for that without bound would hang.
EXIT_GRACE = 1.0


@dataclass(eq=False)
class Handle:
    """The executor's bookkeeping for one worker; subclasses say how to reach and watch it."""

    id: int
    conn: Any
    # Tasks sent to this worker and not yet answered, oldest first: (epoch, index) -> (indices,
    # (first, last) batch index of the message it was sent in).
    outstanding: dict = field(default_factory=dict, kw_only=True)
    # Set while the worker waits for shared-memory room (a WaitingForRoom message).
    waiting: Any = field(default=None, kw_only=True)
    # Messages sent to it that free segments (to tell a stale WaitingForRoom from a live one).
    releases_sent: int = field(default=0, kw_only=True)
    # Tasks it has answered (a worker the autotuner added counts as started after a few).
    answered: int = field(default=0, kw_only=True)

    @property
    def pid(self) -> int:
        raise NotImplementedError

    @property
    def sentinel(self) -> int:
        """A descriptor that becomes readable once the worker has exited."""
        raise NotImplementedError

    @property
    def label(self) -> str:
        """How messages name the worker: "worker 1 (pid 42)"."""
        raise NotImplementedError
