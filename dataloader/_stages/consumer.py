"""Consumer-side stages: they wrap an upstream iterator and run in the consumer's thread.

Every stage is an iterator with ``close()`` that closes its upstream, so the
outermost stage of a chain closes everything.
"""

from __future__ import annotations

from typing import Any, Callable


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
