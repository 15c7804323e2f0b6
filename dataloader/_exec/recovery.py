"""Going on after a sample killed its worker (``on_error="skip"`` or ``"replace"``).

When a worker process dies in the middle of an epoch, each task it had not answered is made
again by probes, one sample at a time, until the samples that kill a process are known
(:mod:`~dataloader._workers.probe`); a fresh worker takes the dead one's place and makes those
tasks with the culprits failed, as if they had raised. A death no probe can pin on a sample
(the OOM killer, a signal from outside) is the :class:`~dataloader.WorkerDiedError` it always
was, and so is every death under ``on_error="raise"``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from .._workers.probe import find_killers
from ..errors import WorkerDiedError

if TYPE_CHECKING:
    from .._workers.pool import WorkerPool
    from .dispatch import Dispatcher
    from .releases import Releases
    from .waiting import Waiter

logger = logging.getLogger("dataloader")


class WorkerRecovery:
    """Replaces a worker killed by a sample and gives its tasks, culprits marked, to the new one."""

    def __init__(
        self, pool: WorkerPool, epoch: int, waiter: Waiter, dispatcher: Dispatcher, releases: Releases, timeout: float
    ) -> None:
        self._pool = pool
        self._releases = releases
        self._epoch = epoch
        self._waiter = waiter
        self._dispatcher = dispatcher
        self._timeout = timeout or None

    def recover(self, error: WorkerDiedError) -> bool:
        """Go on after ``error``; False (raise it) when no probe names a culprit."""
        pool = self._pool
        dead = next((w for w in pool.workers if w.id == error.worker_id and w.id not in pool.retired), None)
        if dead is None:
            return False
        tasks = [task for (epoch, _), (task, _) in list(dead.outstanding.items()) if epoch == self._epoch]
        boot, label = pool.boot_of(dead), dead.label
        marked, culprits = [], 0
        for task in tasks:
            probed = find_killers(pool.context, boot, task, label, self._timeout)
            culprits += probed is not None
            marked.append(probed or task)
        if not culprits:
            return False
        dead.outstanding.clear()
        dead.waiting = None  # no room to grant a dead worker
        self._releases.pending.pop(dead.id, None)  # its segments went with it
        new = pool.replace_worker(dead)
        self._waiter.replace_worker(dead, new)
        pool.broken = False  # the pool is whole again
        logger.warning(
            "%s was killed by a sample (%s); it was left out or replaced, and worker %d took its place",
            label, ", ".join(repr(entry[0]) for task in marked for entry in task.bad), new.id,
        )
        self._dispatcher.resend(new, marked)
        return True


def recovery_for(
    pool: Any, epoch: int, waiter: Any, dispatcher: Any, releases: Any, options: Any, worker_streams: bool
) -> WorkerRecovery | None:
    """A recovery where one can work: process workers, a policy that salvages, and tasks the
    main process hands out (a worker reading its own stream shard cannot be made again)."""
    if options.on_error == "raise" or options.worker_type != "process" or worker_streams:
        return None
    return WorkerRecovery(pool, epoch, waiter, dispatcher, releases, options.timeout)
