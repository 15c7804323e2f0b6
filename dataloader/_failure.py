"""An exception carried through a queue to the consumer, who re-raises it at its turn."""

from __future__ import annotations


class Failure:
    """Holds ``error`` where a batch would be, so the consumer raises it when it reaches that slot."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error
