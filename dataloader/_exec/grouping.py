"""How many tasks one message to a worker carries (``batches_per_message``).

A message costs the same whatever it carries: a pickle, a system call and a wake-up at each
end, tens of microseconds on a busy machine. For a batch that takes a millisecond to make that
is noise; for one of a few hundred scalars, made in 60 us, it is most of the work. So small
batches travel several to a message: the worker makes them in order and answers them in one.

``batches_per_message=None`` (the default) sizes groups from the batches measured so far: about
:data:`GROUP_SECONDS` of a worker's work, at most :data:`MAX_GROUP` batches and
:data:`MAX_GROUP_BYTES` of them. Batches that take longer than that, or are big, go one by one.
"""

from __future__ import annotations

# A group is about this much work: a message's cost (~50-100 us both ends together on a
# loaded 2-core machine) becomes a few percent of it, while the first batch of a group
# waits at most this long for the rest.
GROUP_SECONDS = 0.002
MAX_GROUP = 32
# Bytes of batches one message may carry: small enough that a group never needs more
# shared memory than a large batch would.
MAX_GROUP_BYTES = 4 << 20
# Weight of the newest batch in the running means: a few batches to follow a change.
_WEIGHT = 0.25


class GroupSize:
    """The number of tasks the next message carries: ``fixed``, or (None) sized from
    :meth:`observe`\\ d batches, 1 until the first is measured."""

    def __init__(self, fixed: int | None = None) -> None:
        self._fixed = fixed
        self._seconds: float | None = None  # running mean of a batch's make time
        self._bytes = 0.0  # running mean of a batch's size
        self.size = fixed or 1

    @property
    def measures(self) -> bool:
        """Whether the size follows measured batches (else :meth:`observe` changes nothing)."""
        return self._fixed is None

    def observe(self, seconds: float, nbytes: int) -> None:
        """A batch took ``seconds`` to make (fetch to collate) and ``nbytes`` to send."""
        if self._fixed is not None:
            return
        if self._seconds is None:
            self._seconds, self._bytes = seconds, float(nbytes)
        else:
            self._seconds += _WEIGHT * (seconds - self._seconds)
            self._bytes += _WEIGHT * (nbytes - self._bytes)
        by_time = GROUP_SECONDS / max(self._seconds, 1e-9)
        by_bytes = MAX_GROUP_BYTES / max(self._bytes, 1.0)
        self.size = max(1, min(MAX_GROUP, int(by_time), int(by_bytes)))
