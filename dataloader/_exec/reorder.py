"""The reorder buffer: batches arrive in any order and leave in task order.

With ``in_order=False`` it is a plain FIFO of arrivals. A task that made no
batch (a worker's stream ended) is *skipped* so the order moves past it, as are the tasks a
resumed epoch leaves out (handed out before its state was taken).
"""

from __future__ import annotations

import collections
from typing import Any

_SKIPPED = object()


class ReorderBuffer:
    """Holds finished batches by task index until their turn."""

    def __init__(self, in_order: bool = True, start: int = 0, absent: frozenset[int] = frozenset()) -> None:
        self._in_order = in_order
        self._held: dict[int, Any] = {}
        self._arrivals: collections.deque = collections.deque()
        # A resumed epoch's tasks start at `start` and leave out `absent` (handed out before):
        # their slots are skipped, as for a task that made nothing.
        self._next = start
        self._held.update(dict.fromkeys(absent, _SKIPPED))
        self.last: tuple[int, int] = (-1, -1)  # (task index, worker id) of the latest batch popped

    def __len__(self) -> int:
        """Batches held (skipped slots do not count)."""
        if not self._in_order:
            return len(self._arrivals)
        return sum(1 for held in self._held.values() if held is not _SKIPPED)

    @property
    def waiting_for(self) -> int:
        """The task index whose batch goes out next (in order; -1 otherwise)."""
        return self._next if self._in_order else -1

    def put(self, index: int, value: Any, worker: int = -1) -> None:
        if self._in_order:
            self._held[index] = (value, worker)
        else:
            self._arrivals.append((index, value, worker))

    def skip(self, index: int) -> None:
        """Task ``index`` produced nothing."""
        if self._in_order:
            self._held[index] = _SKIPPED

    def pop(self) -> tuple[bool, Any]:
        """``(True, value)`` for the next deliverable batch, else ``(False, None)``."""
        if not self._in_order:
            if self._arrivals:
                index, value, worker = self._arrivals.popleft()
                self.last = (index, worker)
                return True, value
            return False, None
        while self._next in self._held:
            held = self._held.pop(self._next)
            self._next += 1
            if held is not _SKIPPED:
                self.last = (self._next - 1, held[1])
                return True, held[0]
        return False, None
