"""What a worker knows about itself: :func:`get_worker_info`.

Inside a worker (process or thread) it returns an immutable :class:`WorkerInfo`;
in the main process it returns ``None``. A stream dataset uses it to shard
itself when ``parallel_stream=True``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._local import current_worker_info


@dataclass(frozen=True)
class WorkerInfo:
    """Identity of the current worker.

    ``idx`` and ``worker`` are MegEngine's names for ``id`` and ``num_workers``.
    """

    id: int
    num_workers: int
    seed: int
    dataset: Any

    @property
    def idx(self) -> int:
        return self.id

    @property
    def worker(self) -> int:
        return self.num_workers


def get_worker_info() -> WorkerInfo | None:
    """The :class:`WorkerInfo` of the calling worker, or ``None`` in the main process."""
    info: WorkerInfo | None = current_worker_info()
    return info
