"""The sources of a mix: what kind each is, how it is opened for a source epoch, and how a
map dataset is cut into this process's share of its indices."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import numpy as np

from .._shares import block, check_readable, is_map, keeps_state, open_stream, share, source_fingerprint

MAP_ORDER = 0x6D6170  # keeps a map source's permutation apart from the draws of the same seed


@dataclass(frozen=True)
class Shard:
    """Where this process stands: the mix's seed, its rank of ``world_size``, its worker of ``workers``."""

    seed: int
    world_size: int
    rank: int
    worker: int
    workers: int


class Member:
    """One source of a mix: its name, its place, and what kind of source it is."""

    def __init__(self, name: str, number: int, source: Any) -> None:
        self.name, self.number, self.source = name, number, source
        check_readable(f"MixedStream: source {name!r}", source, "a mix opens each source again every source epoch")
        self.is_map = is_map(source)
        self.yields_batches = not self.is_map and getattr(source, "yields_batches", False) is True
        self.keeps_state = keeps_state(source)

    def open(
        self, epoch: int, shard: Shard, state: Any = None, taken: int = 0, layout: Sequence[Any] = (),
    ) -> Iterator[Any]:
        """This process's items of source epoch ``epoch``, after the ``taken`` it already
        delivered: a stream resumes from ``state`` (its own ``state_dict()``, or the list of
        every old rank's, on another world) where it keeps one, else it is read from the start
        and its first ``taken`` items are dropped. ``layout``: a map source's reshards."""
        if self.is_map:
            return map(self.source.__getitem__, self._indices(epoch, shard, layout)[taken:])
        if self.keeps_state and state is not None:
            return open_stream(self.source, epoch, state)
        return open_stream(self.source, epoch, skip=taken)

    def _indices(self, epoch: int, shard: Shard, layout: Sequence[Any] = ()) -> list[int]:
        """This process's indices of a map source in source epoch ``epoch``: a permutation seeded by
        ``(seed, source, epoch)``, cut into one block per rank and each into one per worker. After
        reshards (``layout``: per reshard, the old world's size and each old rank's ``taken``),
        the old ranks' indices left, in rank order, are what is cut."""
        order = np.random.default_rng([shard.seed, MAP_ORDER, self.number, epoch]).permutation(len(self.source))
        for world, taken in layout:
            left = [order[slice(*block(len(order), world, rank))][done:] for rank, done in enumerate(taken)]
            order = np.concatenate(left) if left else order[:0]
        length = len(order)
        lo, hi = share(length, shard.world_size, shard.rank, shard.worker, shard.workers)
        indices: list[int] = order[lo:hi].tolist()
        return indices

    def state(self) -> Any:
        """The stream's own ``state_dict()`` (None for a source that keeps none)."""
        return self.source.state_dict() if self.keeps_state else None

    def fingerprint(self) -> Any:
        """What decides this source's order, as plain values: its own ``order_fingerprint()``,
        else its class (and a map dataset's length)."""
        return source_fingerprint(self.source)
