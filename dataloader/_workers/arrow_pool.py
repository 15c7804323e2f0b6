"""A forked worker's Arrow allocations from a memory pool the main process never used.

A worker forked from a main process that has read Arrow or Parquet data inherits Arrow's
memory pool with the parent's heap in it: its freed pages, shared with the parent until
written. A worker that reads Parquet allocates from that heap, and pays a copy-on-write fault
for each page it reuses. Given another backend's pool, empty in the parent, it gets pages of
its own. Measured with ``benchmarks/columnar.py``'s image Parquet contenders in a process
that had run the tabular ones first (2 workers, 5 paired runs): 0.94x ``ImageFolder`` with the
inherited pool, 0.96x with jemalloc's or the system's.
"""

from __future__ import annotations

import logging
import sys

logger = logging.getLogger("dataloader")

# Tried in this order; the first that is not the inherited backend and that this pyarrow has.
_BACKENDS = ("jemalloc", "mimalloc", "system")


def use_own_arrow_pool() -> str | None:
    """Make this (forked) process's Arrow allocate from a pool its parent did not use; the
    backend's name, or None where ``pyarrow`` was never imported or no other backend exists."""
    pyarrow = sys.modules.get("pyarrow")
    if pyarrow is None:  # imported later, if ever: its pool then starts empty here
        return None
    try:
        inherited = pyarrow.default_memory_pool().backend_name
    except Exception as error:  # a broken optional state must not stop the worker
        logger.debug("could not read Arrow's memory pool in a worker: %r", error)
        return None
    for name in _BACKENDS:
        if name == inherited:
            continue
        try:
            pyarrow.set_memory_pool(getattr(pyarrow, f"{name}_memory_pool")())
        except Exception:  # a backend this build does not have
            continue
        return name
    return None
