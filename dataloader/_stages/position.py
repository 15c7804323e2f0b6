"""Where an epoch stands: which of its batches the user has had (for ``DataLoader.state_dict``).

Every batch is a pure function of (seed, epoch, batch index, sampler), so a position is small:
the epoch, ``low`` (every batch below it was handed out), the batches above ``low`` handed out
already (``in_order=False`` only), a batch half echoed (``repeats``), and how many batches each
worker handed out (workers that read their own stream shards). Batches made but not yet handed
out (in the reorder buffer, a buffer, the preload queue) are not part of it: a resumed run makes
them again.

The stages between the executor and the user keep order (buffer, preload, conversions, echo),
so :class:`Tally` notes each batch as it leaves the executor (which tasks and worker made it
travel with the batch) and the iterator counts the ones it hands out; the n-th handed out is
the n-th noted.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Any

from .stage import Stage


@dataclass(frozen=True)
class Resume:
    """Where a restored epoch starts: the batches it must not make again and the source's token.

    ``token`` is what the source noted for batch ``low`` (:meth:`Source.resume_point`);
    ``skip_ahead``: re-read and discard what the token cannot restore.
    """

    low: int = 0
    above: frozenset[int] = frozenset()
    # Batches half echoed: (task index, times already handed out, worker or -1) each. One is
    # being echoed at a time, but one restored and not yet made again may wait beside it.
    partial: tuple[tuple[int, int, int], ...] = ()
    # Worker stream shards: the half-echoed batch is the next one its worker makes, whatever
    # its task index (task numbers differ between runs; per-worker order does not).
    partial_by_worker: bool = False
    count: int = 0  # batches handed out in full, all of them
    workers: dict[int, int] = field(default_factory=dict)  # worker id -> batches handed out
    # Worker stream shards read in order: the worker whose batch was handed out last (-1: none);
    # the rotation over the workers resumes after it.
    last_worker: int = -1
    token: dict = field(default_factory=dict)
    skip_ahead: bool = False

    def skips(self, index: int) -> bool:
        """True for a batch handed out before the state was taken (never made again)."""
        return index < self.low or index in self.above


class PositionLog:
    """Tokens a source noted by (epoch, index), pruned as batches are handed out.

    Written by the thread that reads the source and read by the one that takes a state: a dict
    (each operation atomic under the GIL) and a deque of its keys in the order they were noted.
    """

    def __init__(self) -> None:
        self._tokens: dict[tuple[int, int], Any] = {}
        self._order: collections.deque = collections.deque()

    def note(self, key: tuple[int, int], token: Any) -> None:
        self._tokens[key] = token
        self._order.append(key)

    def get(self, key: tuple[int, int]) -> Any:
        return self._tokens.get(key)

    def forget_before(self, key: tuple[int, int]) -> None:
        while self._order and self._order[0] < key:
            self._tokens.pop(self._order.popleft(), None)


_PRUNE_EVERY = 256  # batches between prunings of a source's tokens, when no state is taken


class Position:
    """One epoch's count of what was handed out.

    A buffer or preload thread notes batches made while the user's thread counts the ones
    handed out and takes states: each touches the queue of batches made with one atomic deque
    operation, and only the user's thread changes an entry or the counts, so no lock is needed
    (and none is paid for per batch).
    """

    def __init__(
        self, source: Any, epoch: int, repeats: int, length: int | None, resume: Resume | None,
        counting: bool = False,
    ) -> None:
        resume = resume or Resume()
        self.epoch = epoch
        self._source = source
        self._repeats = repeats
        self._length = length
        self._low = resume.low
        # Until ``low`` moves, the resumed token is where the source stands (its own record of
        # it starts only once the epoch's first batch is read).
        self._resumed_at = (resume.low, resume.token) if resume.token else None
        self._above = set(resume.above)
        self._count = resume.count
        self._workers = collections.Counter(resume.workers)
        self._last_worker = resume.last_worker
        # Restored half-echoed batches not yet made again, by task index (or by worker).
        self._partial_by_worker = resume.partial_by_worker
        self._restored = {entry[2] if resume.partial_by_worker else entry[0]: entry for entry in resume.partial}
        # Batches out of the executor, not yet handed out in full: [keys, worker, echoes left].
        self._made: collections.deque = collections.deque()
        # Sources that note a token per batch prune them as batches are handed out; others need no call.
        self._forget = source.forget_before if source.notes_tokens else None
        # Counting: batches come out by task index and nothing between the Tally and the user
        # reads ahead or echoes (and no worker counts are needed), so every batch handed out is
        # the latest one made: counting them is enough until a state is taken, and that is all
        # a batch costs.
        self._counting = counting
        self._latest: tuple[int, ...] = ()  # counting: the tasks of the latest batch made
        self._handed = 0  # counting: batches handed out, not yet counted in

    def _catch_up(self) -> None:
        """Count in the batches handed out in order since the last state: all up to the
        latest one made."""
        if not self._handed:
            return
        self._count += self._handed
        self._handed = 0
        self._low = self._latest[-1]
        self._mark(self._low)
        self._above = {key for key in self._above if key > self._low}
        if self._forget is not None:
            self._forget(self.epoch, self._low)

    def made(self, keys: tuple[int, ...], worker: int) -> None:
        """A batch (made from the tasks ``keys``) left the executor."""
        if self._counting:
            self._latest = keys
            return
        if not self._restored:
            self._made.append([keys, worker, self._repeats])
            return
        key = worker if self._partial_by_worker else keys[0]
        partial = self._restored.get(key)
        self._made.append([keys, worker, self._repeats - (partial[1] if partial is not None else 0)])
        self._restored.pop(key, None)  # after: a state taken between the two sees it in one place or both

    def echoes_left(self) -> int:
        """How many times the batch just pulled by the echo stage is still to be handed out."""
        return self._made[0][2] if self._made else self._repeats

    def handed_out(self) -> None:
        """The user got a batch (one echo of it)."""
        if self._counting:
            self._handed += 1
            if self._handed >= _PRUNE_EVERY and self._forget is not None:
                self._catch_up()  # the source's tokens of batches handed out go, now and then
            return
        entry = self._made[0]
        entry[2] -= 1
        if entry[2] > 0:
            return
        self._made.popleft()
        self._done(entry[0], entry[1])

    def unmade(self) -> None:
        """A batch that was not made (it raised, or every sample of it failed) had its turn: it
        counts as handed out in full, echoes and all (a resumed run would not make it either)."""
        if self._counting:
            self.handed_out()
            return
        entry = self._made.popleft()
        self._done(entry[0], entry[1])

    def _done(self, keys: tuple[int, ...], worker: int) -> None:
        """The batch made from the tasks ``keys`` was handed out in full."""
        if keys[0] == self._low and len(keys) == 1 and not self._above:
            self._low += 1  # in order: the common case
        else:
            for key in keys:
                self._mark(key)
        self._count += 1
        if worker >= 0:
            self._workers[worker] += 1
            self._last_worker = worker
        if self._forget is not None:
            self._forget(self.epoch, self._low)

    @property
    def length(self) -> int | None:
        """Batches in the epoch (echoes not counted), or None for a stream."""
        return self._length

    def handed_out_count(self) -> int:
        """Batches handed out in full this epoch (restored ones included)."""
        self._catch_up()
        return self._count

    def remaining(self) -> int | None:
        """Batches (echoes included) this epoch still hands out, or None when unknown."""
        if self._length is None:
            return None
        self._catch_up()
        echoed = sum(entry[1] for entry in self._restored.values())
        return max(0, (self._length - self._count) * self._repeats - echoed)

    def snapshot(self) -> dict:
        """The position as plain values, the source's token included (in the user's thread)."""
        self._catch_up()
        low, above, count, workers = self._low, sorted(self._above), self._count, dict(self._workers)
        last_worker = self._last_worker
        # Half-echoed batches: restored ones not made again yet, and made ones with echoes
        # left: the one being echoed, and restored ones made again but queued behind it.
        # Copied by one call each (atomic without the GIL too): the preload thread appends to
        # _made and pops from _restored while this runs, and iterating either then would raise.
        partial = [list(entry) for entry in self._restored.copy().values()]
        partial += [[keys[0], self._repeats - left, worker] for keys, worker, left in self._made.copy() if left < self._repeats]
        epoch = self.epoch
        resumed = self._resumed_at
        token = resumed[1] if resumed is not None and resumed[0] == low else self._source.resume_point(epoch, low)
        if not partial and self._length is not None and count >= self._length:
            # Every batch was handed out: the state resumes at the start of the next epoch.
            epoch, low, above, count, workers, last_worker = epoch + 1, 0, [], 0, {}, -1
        return {
            "epoch": epoch,
            "low": low,
            "above": above,
            "partial": partial,
            "count": count,
            "workers": {str(worker): n for worker, n in sorted(workers.items())},
            "last_worker": last_worker,
            "source": token,
        }

    def _mark(self, key: int) -> None:
        """Task ``key`` is done: ``low`` moves past it and any done above it, else it waits above."""
        if key != self._low:
            self._above.add(key)
            return
        self._low += 1
        while self._low in self._above:
            self._above.discard(self._low)
            self._low += 1


class Tally(Stage):
    """Notes each batch its upstream (an executor, or the stage that reassembles chunks) makes:
    items come as ``(batch, task indices, worker id or -1)`` and leave as the batch alone."""

    def __init__(self, upstream: Any, position: Position) -> None:
        super().__init__(upstream)
        self._made = position.made

    def __next__(self) -> Any:
        batch, keys, worker = next(self.upstream)
        self._made(keys, worker)
        return batch
