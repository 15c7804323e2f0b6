"""One ``iter()`` of a mix in one process: the open sources, what each has delivered, which
have run out, and the draws; what ``state_dict()`` and ``stats()`` read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np

from ._draws import Draws
from ._sources import Member, Shard


@dataclass(frozen=True)
class MixSourceStats:
    """One source of a mix, as this process has read it in the mix's current epoch."""

    name: str
    weight: float  # as given to the mix
    items: int  # items (rows, or batches) it delivered in the mix's epoch
    fraction: float  # items / the mix's items: the realized share, to compare with the weights'
    epoch: int  # the source epoch it is in (under stop="never" it moves on when it runs out)
    exhausted: bool  # it ran out and is no longer drawn from


@dataclass(frozen=True)
class MixStats:
    """A mix's epoch as this process saw it (see :meth:`MixedStream.stats`)."""

    epoch: int
    items: int  # items this process delivered in the epoch, all sources together
    sources: tuple[MixSourceStats, ...]

    @property
    def fractions(self) -> dict[str, float]:
        """``{name: fraction}`` of every source."""
        return {source.name: source.fraction for source in self.sources}


def _unopened() -> Any:
    raise StopIteration  # a source of weight 0 or run out: never drawn, and never read


class Run:
    """One process's pass over one epoch of a mix, from a saved state or from the start.

    ``epochs``, ``taken`` (items of the current source epoch), ``delivered`` (items of the
    mix's epoch) and ``exhausted`` are per source; ``reads`` holds each source's ``__next__``.
    Every count is updated before an item is handed out, so :meth:`state` between two items
    says exactly where the next one comes from.
    """

    def __init__(
        self, members: list[Member], stop: str, epoch: int, shard: Shard, resume: dict[str, Any] | None,
        open_sources: bool = True,
    ) -> None:
        saved = (resume or {}).get("sources", {})
        self.members, self.stop, self.epoch, self.shard = members, stop, epoch, shard
        self.epochs = [int(saved[m.name]["epoch"]) if m.name in saved else epoch for m in members]
        self.taken = [int(saved[m.name]["taken"]) if m.name in saved else 0 for m in members]
        self.delivered = [int(saved[m.name]["delivered"]) if m.name in saved else 0 for m in members]
        self.exhausted = [bool(saved[m.name]["exhausted"]) if m.name in saved else False for m in members]
        self.active = np.array([m.weight > 0 and not out for m, out in zip(members, self.exhausted)])
        weights = np.array([m.weight for m in members], dtype=np.float64)
        key = (shard.seed, epoch, shard.rank, shard.worker)
        self.draws = Draws(key, weights, int(resume["draws"]) if resume else 0)
        self.reads: list[Callable[[], Any]] = [_unopened] * len(members)
        for number, member in enumerate(members):
            if open_sources and self.active[number]:
                state = saved[member.name]["state"] if member.name in saved else None
                self._open(number, state)

    def _open(self, number: int, state: Any = None) -> None:
        member = self.members[number]
        items = member.open(self.epochs[number], self.shard, state, self.taken[number])
        self.reads[number] = iter(items).__next__

    @property
    def ended(self) -> bool:
        """Nothing more comes: every source is out, or (``first_exhausted``) one is."""
        return not self.active.any() or (self.stop == "first_exhausted" and any(self.exhausted))

    def ran_out(self, number: int) -> None:
        """Source ``number`` has no item left in its source epoch: under ``"never"`` it starts its
        next one (one that yields nothing at all is dropped instead); else it is dropped."""
        if self.stop == "never" and self.taken[number]:
            self.epochs[number] += 1
            self.taken[number] = 0
            self._open(number)
            return
        self.exhausted[number] = True
        self.active[number] = False
        self.reads[number] = _unopened

    def items(self) -> Iterator[Any]:
        """The mix's items, each from the source its draw picked."""
        draws, reads, taken, delivered = self.draws, self.reads, self.taken, self.delivered
        while not self.ended:
            for number in draws.choices(self.active):
                try:
                    item = reads[number]()
                except StopIteration:
                    self.ran_out(number)
                    break  # draw again from this draw on, among the sources left
                taken[number] += 1
                delivered[number] += 1
                draws.position += 1
                yield item

    def state(self) -> dict[str, Any]:
        """Where the next item comes from, as plain values (see ``MixedStream.state_dict``)."""
        sources = {}
        for number, member in enumerate(self.members):
            opened = self.reads[number] is not _unopened
            sources[member.name] = {
                "epoch": self.epochs[number],
                "taken": self.taken[number],
                "delivered": self.delivered[number],
                "exhausted": self.exhausted[number],
                "state": member.state() if opened else None,
            }
        return {"epoch": self.epoch, "draws": self.draws.position, "sources": sources}

    def snapshot(self) -> MixStats:
        total = sum(self.delivered)
        return MixStats(self.epoch, total, tuple(
            MixSourceStats(m.name, m.weight, count, count / total if total else 0.0, source_epoch, out)
            for m, count, source_epoch, out in zip(self.members, self.delivered, self.epochs, self.exhausted)
        ))
