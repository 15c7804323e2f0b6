"""What the executor knows of one worker, whether a process or a thread."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(eq=False)
class Handle:
    """The executor's bookkeeping for one worker; subclasses say how to reach and watch it."""

    id: int
    conn: Any
    # Tasks sent to this worker and not yet answered, oldest first: (epoch, index) -> indices.
    outstanding: dict = field(default_factory=dict, kw_only=True)
    # Set while the worker waits for shared-memory room (a WaitingForRoom message).
    waiting: Any = field(default=None, kw_only=True)
    # Messages sent to it that free segments (to tell a stale WaitingForRoom from a live one).
    releases_sent: int = field(default=0, kw_only=True)

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
