"""One ``iter()`` of a mix in one process: the open sources, what each has delivered, which
have run out, and the draws; what ``state_dict()`` and ``stats()`` read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np

from ._draws import RESHARD, Draws
from ._schedule import Weights
from ._sources import Member, Shard


@dataclass(frozen=True)
class MixSourceStats:
    """One source of a mix, as this process has read it in the mix's current epoch."""

    name: str
    weight: float  # in force now (a schedule's at the count of items drawn), not normalised
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
    drawn: int = 0  # items drawn since the run began (what a weight schedule reads)

    @property
    def fractions(self) -> dict[str, float]:
        """``{name: fraction}`` of every source."""
        return {source.name: source.fraction for source in self.sources}


def _unopened() -> Any:
    raise StopIteration  # a source that ran out: never drawn again, and never read


class Run:
    """One process's pass over one epoch of a mix, from a saved state or from the start.

    ``epochs``, ``taken`` (items of the current source epoch), ``delivered`` (items of the
    mix's epoch) and ``exhausted`` are per source; ``reads`` holds each opened source's
    ``__next__`` (None until a draw first picks it: a source never drawn is never read).
    Every count is updated before an item is handed out, so :meth:`state` between two items
    says exactly where the next one comes from. ``base``: the items drawn before this epoch
    (a state's ``drawn`` minus its ``draws`` where it resumes).
    """

    def __init__(
        self, members: list[Member], weights: Weights, stop: str, epoch: int, shard: Shard,
        resume: dict[str, Any] | None, base: int = 0,
    ) -> None:
        saved = (resume or {}).get("sources", {})
        self.members, self.stop, self.epoch, self.shard = members, stop, epoch, shard
        self.epochs = [int(saved[m.name]["epoch"]) if m.name in saved else epoch for m in members]
        self.taken = [int(saved[m.name]["taken"]) if m.name in saved else 0 for m in members]
        self.delivered = [int(saved[m.name]["delivered"]) if m.name in saved else 0 for m in members]
        self.exhausted = [bool(saved[m.name]["exhausted"]) if m.name in saved else False for m in members]
        self.active = np.array([not out for out in self.exhausted])
        # a source's own state, loaded when it is first opened, and saved as it is until then
        self.pending: list[Any] = [saved[m.name]["state"] if m.name in saved else None for m in members]
        # a map source's cut after reshards (see _elastic), for its current source epoch only
        self.layouts: list[list[Any]] = [list(saved[m.name].get("layout", [])) if m.name in saved else []
                                         for m in members]
        self.reshards = int((resume or {}).get("reshards", 0))
        key: tuple[int, ...] = (shard.seed, epoch, shard.rank, shard.worker)
        if self.reshards:  # neither the old world's draws nor those of a resume on it
            key += (RESHARD, self.reshards, shard.world_size)
        position = int(resume["draws"]) if resume else 0
        if resume is not None and "drawn" in resume:
            base = int(resume["drawn"]) - position
        self.draws = Draws(key, weights, position, base)
        self.reads: list[Callable[[], Any] | None] = [None] * len(members)

    def _open(self, number: int) -> Callable[[], Any]:
        member = self.members[number]
        state, self.pending[number] = self.pending[number], None
        items = member.open(self.epochs[number], self.shard, state, self.taken[number], self.layouts[number])
        read = self.reads[number] = iter(items).__next__
        return read

    @property
    def ended(self) -> bool:
        """Nothing more comes: every source is out, or (``first_exhausted``) one is."""
        return not self.active.any() or (self.stop == "first_exhausted" and any(self.exhausted))

    def ran_out(self, number: int) -> None:
        """Source ``number`` has no item left in its source epoch: under ``"never"`` it starts its
        next one (one that yields nothing at all is dropped instead); else it is dropped."""
        if self.stop == "never" and (self.taken[number] or self.layouts[number]):
            self.epochs[number] += 1
            self.taken[number], self.layouts[number] = 0, []
            self._open(number)
            return
        if self.members[number].keeps_state:  # where it ended, for a reshard of this state
            self.pending[number] = self.members[number].state()
        self.exhausted[number] = True
        self.active[number] = False
        self.reads[number] = _unopened

    def items(self) -> Iterator[Any]:
        """The mix's items, each from the source its draw picked. The epoch also ends where no
        source still in the mix has a weight in force (a schedule's zero for every one of them)."""
        draws, reads, taken, delivered = self.draws, self.reads, self.taken, self.delivered
        while not self.ended:
            chosen = draws.choices(self.active)
            if not chosen:
                return
            for number in chosen:
                try:
                    item = (reads[number] or self._open(number))()
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
            if member.keeps_state and self.reads[number] is None and not self.exhausted[number]:
                self._open(number)  # not drawn yet: its own state, where every rank has one to reshard
            opened = self.reads[number] is not None and self.reads[number] is not _unopened
            sources[member.name] = {
                "epoch": self.epochs[number],
                "taken": self.taken[number],
                "delivered": self.delivered[number],
                "exhausted": self.exhausted[number],
                "state": member.state() if opened else self.pending[number],
            }
            if self.layouts[number]:
                sources[member.name]["layout"] = self.layouts[number]
        state = {"epoch": self.epoch, "draws": self.draws.position, "drawn": self.draws.drawn, "sources": sources}
        if self.reshards:
            state["reshards"] = self.reshards
        return state

    def snapshot(self) -> MixStats:
        total = sum(self.delivered)
        now = self.draws.weights.at(self.draws.drawn)[0].tolist()
        return MixStats(self.epoch, total, tuple(
            MixSourceStats(m.name, weight, count, count / total if total else 0.0, source_epoch, out)
            for m, weight, count, source_epoch, out
            in zip(self.members, now, self.delivered, self.epochs, self.exhausted)
        ), self.draws.drawn)
