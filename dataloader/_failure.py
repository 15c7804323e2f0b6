"""Stand-ins for a batch on its way to the consumer: an exception to re-raise at its turn,
or a batch that was not made.

:class:`Failure` ends the epoch where the consumer meets it (a buffer's thread failed, say).
:class:`Unmade` takes a batch's place and its turn without ending anything: every stage
between the executor and the user passes it on untouched, and the epoch's iterator counts it
as handed out, then raises its ``error`` (a batch whose making raised, ``on_error="raise"``) or
goes on to the next batch (:data:`LEFT_OUT`: every sample of it failed under
``on_error="skip"``). Either way the next ``next()`` yields the following batch.
"""

from __future__ import annotations


class Failure:
    """Holds ``error`` where a batch would be, so the consumer raises it when it reaches that slot."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


class Unmade:
    """A batch that was not made: ``error`` to raise at its turn, or None (left out)."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException | None) -> None:
        self.error = error


LEFT_OUT = Unmade(None)
"""A batch whose every sample failed under ``on_error="skip"``: it is left out of the epoch."""
