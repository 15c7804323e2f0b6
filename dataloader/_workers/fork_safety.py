"""A process forked by user code (``os.fork()``) leaves the parent's workers alone.

A child forked while a :class:`~dataloader._workers.pool.WorkerPool` runs
inherits it, and without care it would harm the parent's loader:

- the workers are in ``multiprocessing``'s list of children, so its exit
  handler, in the child, sends them ``SIGTERM`` (and the child's garbage
  collection of the iterator would send them ``Shutdown``);
- the child holds the main ends of the workers' sockets, so a ``next()`` in it
  takes a batch meant for the parent;
- the child holds the write end of the "parent alive" pipe, so after the parent
  is killed its workers live on for as long as the child does.

So every pool is watched here, and an at-fork handler detaches each in the
child (:meth:`WorkerPool.detach`): the child forgets the worker processes and
closes its copies of their descriptors, and an iterator used there raises a
:class:`~dataloader.errors.DataLoaderError`. The parent pays nothing: the
handler runs only in children. The loader's own workers (the ``fork`` start
method) are such children too, and lose nothing they need: the pool that forks
them lists a worker only once it has started, and the handler leaves the read
end of the "parent alive" pipe, which the workers watch, open.
"""

from __future__ import annotations

import os
import weakref
from typing import Any

_pools: weakref.WeakSet = weakref.WeakSet()
_registered = False


def watch(pool: Any) -> None:
    """Detach ``pool`` (its ``detach()``) in every child forked while it is alive."""
    global _registered
    if not _registered:
        os.register_at_fork(after_in_child=_detach_all)
        _registered = True
    _pools.add(pool)


def _detach_all() -> None:
    """In a freshly forked child: let go of every pool of the parent."""
    pools = list(_pools)
    _pools.clear()  # none of them is the child's; a grandchild has nothing to detach
    for pool in pools:
        pool.detach()
