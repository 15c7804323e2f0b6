"""Consumer-side stages: they wrap an upstream iterator and run in the consumer's thread.

Each is a :class:`~dataloader._stages.stage.Stage`, so the outermost stage of
a chain closes everything. The stages that run upstream in a thread of their
own (buffer, preload) live in ``buffering`` and ``_device/preload``.
"""

from __future__ import annotations

from typing import Any, Callable

from .._failure import LEFT_OUT, Unmade
from .stage import Stage
from .task import Chunk


class MapBatches(Stage):
    """Passes each upstream batch through ``step`` (a device conversion, a batch transform).

    Exceptions from ``step`` propagate unwrapped: it runs in the consumer's own thread.
    """

    def __init__(self, upstream: Any, step: Callable[[Any], Any]) -> None:
        super().__init__(upstream)
        self._step = step

    def __next__(self) -> Any:
        batch = next(self.upstream)
        return batch if type(batch) is Unmade else self._step(batch)


class Echo(Stage):
    """Hands each upstream item out ``repeats`` times: the same object, not a copy.

    Data echoing (Choi et al., 2019, "Faster Neural Network Training with
    Data Echoing"; Fischetti et al., 2018, minibatch persistency): when
    loading is slower than the step, reusing a batch a few times keeps the
    accelerator busy while the next batch is made in the background.
    """

    def __init__(self, upstream: Any, repeats: int, position: Any = None) -> None:
        super().__init__(upstream)
        self._repeats = repeats
        self._position = position  # tells how often a batch half echoed before a resume is left
        self._batch: Any = None
        self._left = 0

    def __next__(self) -> Any:
        if self._left == 0:
            self._batch = next(self.upstream)
            if type(self._batch) is Unmade:  # handed out once: there is nothing to echo
                return self._batch
            self._left = self._position.echoes_left() if self._position is not None else self._repeats
        self._left -= 1
        return self._batch

    def _release(self) -> None:
        self._batch = None


class Reassemble(Stage):
    """Puts batches split into chunks back together in job order, then collates them.

    Items come and go as ``(batch, task indices, worker)``; a reassembled batch names every
    task that made a part of it, and no worker."""

    def __init__(self, upstream: Any, collator: Any, policy: Any = None) -> None:
        super().__init__(upstream)
        self._collator = collator
        self._policy = policy  # fills the places of samples that failed (see Chunk.vacant)
        self._parts: dict[int, list] = {}

    def __next__(self) -> Any:
        while True:
            made = next(self.upstream)
            item = made[0]
            if not isinstance(item, Chunk):  # a whole batch, or an Unmade one
                return made
            parts = self._parts.setdefault(item.batch, [])
            parts.append(item)
            if len(parts) == item.parts:
                del self._parts[item.batch]
                parts.sort(key=lambda chunk: chunk.index)
                keys = tuple(chunk.index for chunk in parts)
                samples = [sample for chunk in parts for sample in chunk.samples]
                if any(chunk.vacant for chunk in parts):
                    samples = self._fill(parts, samples)
                return (self._collator.apply(samples) if samples else LEFT_OUT), keys, -1

    def _fill(self, parts: list[Chunk], samples: list) -> list:
        """Put one of the batch's good samples, chosen as a worker would, in each vacant place."""
        vacant, start = [], 0
        for chunk in parts:
            vacant += [start + place for place in chunk.vacant]
            start += len(chunk.samples)
        holes = set(vacant)
        good = [place for place in range(len(samples)) if place not in holes]
        if not good:
            return []
        first = parts[0]
        for place in vacant:
            samples[place] = samples[good[self._policy.stand_in(first.epoch, first.batch, place, len(good))]]
        return samples

    def _release(self) -> None:
        self._parts.clear()
