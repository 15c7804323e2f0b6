"""The timeout report: what each busy worker was making when no batch came, and its stack."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._stages.task import listed
from ..errors import LoaderTimeoutError

if TYPE_CHECKING:
    from .._workers.handle import Handle
    from .._workers.pool import WorkerPool
    from .._workers.threads import ThreadWorkerPool


def timeout_error(pool: WorkerPool | ThreadWorkerPool, timeout: float) -> LoaderTimeoutError:
    """The error for no batch within ``timeout`` seconds: for each worker with outstanding
    tasks, the oldest task, its indices, and the worker's current stack."""
    lines = [
        f"DataLoader timed out after {timeout:g} seconds: no batch arrived (timeout={timeout:g}). "
        "Raise `timeout` if batches are legitimately slow; otherwise the stack below shows "
        "where the dataset or transform is stuck."
    ]
    lines += [_busy(pool, worker) for worker in pool.workers if worker.outstanding]
    return LoaderTimeoutError("\n".join(lines))


def _busy(pool: WorkerPool | ThreadWorkerPool, worker: Handle) -> str:
    (_, index), (task, (first, last)) = next(iter(worker.outstanding.items()))
    indices = task.indices
    what = f"indices {listed(indices)}" if indices is not None else "its stream"
    # Batches sent in one message are answered together: the worker may be past the first.
    later = f", or a later batch of the message it came in (batches {first}-{last})" if last > index else ""
    return (
        f"{worker.label} has been making batch {index} from {what}{later}; "
        f"its stack:\n{pool.stack(worker).rstrip() or '(unavailable)'}"
    )
