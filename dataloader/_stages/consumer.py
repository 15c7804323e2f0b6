"""Consumer-side stages: they wrap an upstream iterator and run in the consumer's thread.

Every stage is an iterator with ``close()`` that closes its upstream, so the
outermost stage of a chain closes everything.
"""

from __future__ import annotations

from typing import Any, Callable

from .task import Chunk


class Stage:
    """Passes ``upstream`` through ``step`` one batch at a time."""

    def __init__(self, upstream: Any, step: Callable[[Any], Any]) -> None:
        self.upstream = upstream
        self._step = step

    def __iter__(self) -> "Stage":
        return self

    def __next__(self) -> Any:
        return self._step(next(self.upstream))

    def close(self) -> None:
        self.upstream.close()


def apply_batch_transform(upstream: Any, transform: Any) -> Stage:
    """Run ``transform.apply`` on each whole batch (a :class:`~dataloader.transform.BatchTransform`).

    Its exceptions propagate unwrapped: it runs in the consumer's own thread.
    """
    return Stage(upstream, transform.apply)


class Echo:
    """Hands each upstream batch out ``repeats`` times: the same object, not a copy.

    Data echoing (Choi et al., 2019, "Faster Neural Network Training with
    Data Echoing"; Fischetti et al., 2018, minibatch persistency): when
    loading is slower than the step, reusing a batch a few times keeps the
    accelerator busy while the next batch is made in the background.
    """

    def __init__(self, upstream: Any, repeats: int) -> None:
        self.upstream = upstream
        self._repeats = repeats
        self._batch: Any = None
        self._left = 0

    def __iter__(self) -> "Echo":
        return self

    def __next__(self) -> Any:
        if self._left == 0:
            self._batch = next(self.upstream)
            self._left = self._repeats
        self._left -= 1
        return self._batch

    def close(self) -> None:
        self._batch = None
        self.upstream.close()


class Reassemble:
    """Puts batches split into chunks back together in job order, then collates them."""

    def __init__(self, upstream: Any, collator: Any) -> None:
        self.upstream = upstream
        self._collator = collator
        self._parts: dict[int, list] = {}

    def __iter__(self) -> "Reassemble":
        return self

    def __next__(self) -> Any:
        while True:
            item = next(self.upstream)
            if not isinstance(item, Chunk):
                return item
            parts = self._parts.setdefault(item.batch, [])
            parts.append(item)
            if len(parts) == item.parts:
                del self._parts[item.batch]
                parts.sort(key=lambda chunk: chunk.index)
                return self._collator.apply([sample for chunk in parts for sample in chunk.samples])

    def close(self) -> None:
        self._parts.clear()
        self.upstream.close()
