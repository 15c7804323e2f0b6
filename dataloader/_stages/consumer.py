"""Consumer-side stages: they wrap an upstream iterator and run in the consumer's thread.

Each is a :class:`~dataloader._stages.stage.Stage`, so the outermost stage of
a chain closes everything. The stages that run upstream in a thread of their
own (buffer, preload) live in ``buffering`` and ``_device/preload``.
"""

from __future__ import annotations

from typing import Any, Callable

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
        return self._step(next(self.upstream))


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
            self._left = self._position.echoes_left() if self._position is not None else self._repeats
        self._left -= 1
        return self._batch

    def _release(self) -> None:
        self._batch = None


class Reassemble(Stage):
    """Puts batches split into chunks back together in job order, then collates them."""

    def __init__(self, upstream: Any, collator: Any) -> None:
        super().__init__(upstream)
        self._collator = collator
        self._parts: dict[int, list] = {}
        self.last_made: tuple[tuple[int, ...], int] = ((), -1)  # the latest batch's tasks

    def __next__(self) -> Any:
        while True:
            item = next(self.upstream)
            if not isinstance(item, Chunk):
                self.last_made = self.upstream.last_made
                return item
            parts = self._parts.setdefault(item.batch, [])
            parts.append(item)
            if len(parts) == item.parts:
                del self._parts[item.batch]
                parts.sort(key=lambda chunk: chunk.index)
                self.last_made = (tuple(chunk.index for chunk in parts), -1)
                return self._collator.apply([sample for chunk in parts for sample in chunk.samples])

    def _release(self) -> None:
        self._parts.clear()
