"""The reorder buffer: batches arrive in any order and leave in task order.

With ``in_order=False`` it is a plain FIFO of arrivals. A task that made no
batch (a worker's stream ended) is *skipped* so the order moves past it.
"""

from __future__ import annotations

import collections
from typing import Any

_SKIPPED = object()


class ReorderBuffer:
    """Holds finished batches by task index until their turn."""

    def __init__(self, in_order: bool = True) -> None:
        self._in_order = in_order
        self._held: dict[int, Any] = {}
        self._arrivals: collections.deque = collections.deque()
        self._next = 0

    def __len__(self) -> int:
        """Batches held (skipped slots do not count)."""
        if not self._in_order:
            return len(self._arrivals)
        return sum(1 for value in self._held.values() if value is not _SKIPPED)

    def put(self, index: int, value: Any) -> None:
        if self._in_order:
            self._held[index] = value
        else:
            self._arrivals.append(value)

    def skip(self, index: int) -> None:
        """Task ``index`` produced nothing."""
        if self._in_order:
            self._held[index] = _SKIPPED

    def pop(self) -> tuple[bool, Any]:
        """``(True, value)`` for the next deliverable batch, else ``(False, None)``."""
        if not self._in_order:
            if self._arrivals:
                return True, self._arrivals.popleft()
            return False, None
        while self._next in self._held:
            value = self._held.pop(self._next)
            self._next += 1
            if value is not _SKIPPED:
                return True, value
        return False, None
