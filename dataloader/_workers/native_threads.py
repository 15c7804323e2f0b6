"""One native thread per worker process: the libraries' own thread pools capped at start.

PyTorch's intra-op pool, OpenMP, BLAS and OpenCV each size their pools for the
whole machine, so ``num_workers`` processes would run that many pools of every
core, on cores the other workers need. OpenMP and OpenBLAS threads spin while they
wait for work, which turns the oversubscription into a collapse: with 2 workers on
2 cores, a transform running a small convolution with PyTorch went 7x slower, and
one running a NumPy matmul 10x slower. And GNU OpenMP is not fork-safe: a forked
worker entering a parallel region whose pool the parent had started waited forever
for threads that were never forked. PyTorch's DataLoader caps torch's pool in its
workers; this caps every pool it can reach, before ``worker_init_fn`` runs, so that
function may raise a count again (``torch.set_num_threads``, ``threadpoolctl``).

Libraries already loaded are capped through their own calls (torch, OpenCV) and
through ``threadpoolctl`` where it is installed (BLAS and OpenMP, which NumPy and
SciPy load with no Python-level control): for forked workers by the main process
around the fork (:func:`cap_for_fork`), for spawned ones in the worker. Libraries
loaded later read the environment variables set here. Thread workers share the main
process's pools, which are left alone: capping them would slow the training step.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import warnings
from typing import Any, Callable

logger = logging.getLogger("dataloader")

# Read when a library starts its pool: covers libraries first imported in the worker.
THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)


# The main process's cap on its BLAS and OpenMP pools while it forks workers (see cap_for_fork).
# Reference-counted: loaders started together share one cap, and the counts come back when
# the last of them lets go. A forked worker inherits these values: holders > 0 means capped.
_lock = threading.Lock()
_holders = 0
_limits: Any = None


def cap_for_fork() -> Callable[[], None]:
    """In the main process, before forking workers: BLAS and OpenMP at one thread, so the
    workers are born capped. Returns the function that gives the main process its counts
    back; call it once the workers have started (later calls do nothing).

    Why not cap in the worker: after a fork, OpenBLAS restarts its pool at the first call
    that touches it, even one that sets one thread, and each thread it starts spins for
    0.1 s before it sleeps: about 100 ms of CPU per OpenBLAS library (NumPy and OpenCV each
    bring one) per worker, on the way to its first batch. A worker born with one thread
    never restarts the pool. The main process pays one restart, when its counts come back
    (after the first batch, not on the way to it).
    """
    global _holders, _limits
    with _lock:
        if _holders == 0:
            try:
                _limits = _limit_blas_and_openmp()
            except Exception as error:  # the workers will try again themselves
                logger.debug("could not cap BLAS and OpenMP before forking workers: %r", error)
                return _nothing
            if _limits is None:
                return _nothing  # no threadpoolctl
        _holders += 1
    restored = False

    def restore() -> None:
        nonlocal restored
        global _holders, _limits
        with _lock:
            if restored:
                return
            restored = True
            _holders -= 1
            if _holders == 0:
                limits, _limits = _limits, None
                try:
                    limits.restore_original_limits()
                except Exception as error:  # never let this stop an epoch
                    logger.debug("could not restore BLAS and OpenMP thread counts: %r", error)

    return restore


def _nothing() -> None:
    return None


def use_one_native_thread() -> list[str]:
    """Cap this process's native thread pools at one thread; return what was capped.

    Never raises: a library that refuses (an odd build, a version without the call)
    is logged at debug level and keeps its pool.
    """
    for name in THREAD_VARIABLES:
        os.environ[name] = "1"
    capped = []
    for name, cap in _CAPS:
        try:
            if cap():
                capped.append(name)
        except Exception as error:  # a broken optional library must not stop the worker
            logger.debug("could not cap the threads of %s in a worker: %r", name, error)
    return capped


def _cap_torch() -> bool:
    torch = sys.modules.get("torch")  # not imported: the variables cover it if it ever is
    if torch is None:
        return False
    torch.set_num_threads(1)
    return True


def _cap_cv2() -> bool:
    cv2 = sys.modules.get("cv2")
    if cv2 is None:
        return False
    cv2.setNumThreads(0)  # 0: OpenCV runs its functions sequentially, in the calling thread
    return True


def _cap_blas_and_openmp() -> bool:
    if _holders:
        return True  # forked while the main process held them capped (see cap_for_fork)
    return _limit_blas_and_openmp() is not None


def _limit_blas_and_openmp() -> Any:
    """``threadpoolctl.threadpool_limits(1)`` (its ``restore_original_limits`` undoes it), or
    None where threadpoolctl is not installed: BLAS and OpenMP then keep their pools."""
    try:
        import threadpoolctl
    except ImportError:
        return None
    with warnings.catch_warnings():
        # e.g. two OpenMP runtimes loaded at once: the user's to hear about, not the loader's
        warnings.simplefilter("ignore")
        return threadpoolctl.threadpool_limits(limits=1)


_CAPS = (("torch", _cap_torch), ("cv2", _cap_cv2), ("BLAS/OpenMP", _cap_blas_and_openmp))
