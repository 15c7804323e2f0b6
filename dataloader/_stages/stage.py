"""The contract every iterator of the chain keeps: :class:`Stage`.

A stage iterates its ``upstream`` (the stage before it, or the tasks at the
bottom of the chain) and ``close()`` releases what the stage itself holds,
then closes upstream, once. Closing the outermost stage therefore closes the
whole chain down to the source and the workers, whichever stage ends first.
"""

from __future__ import annotations

from typing import Any


class Stage:
    """An iterator over ``upstream`` with an idempotent ``close()`` that closes upstream too.

    Subclasses write ``__next__`` and, if they hold threads or buffers,
    ``_release()``; everything else is here.
    """

    def __init__(self, upstream: Any) -> None:
        self.upstream = upstream
        self.closed = False

    def __iter__(self) -> "Stage":
        return self

    def __next__(self) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define __next__")

    def _release(self) -> None:
        """Free what this stage holds; called once, before upstream is closed."""

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._teardown()

    def _teardown(self) -> None:
        """Release what this stage holds, then close upstream (a stage that may be closed from
        another thread decides when; see ``occupancy``)."""
        try:
            self._release()
        finally:
            close_upstream = getattr(self.upstream, "close", None)
            if close_upstream is not None:
                close_upstream()
