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
SciPy load with no Python-level control). Libraries loaded later read the
environment variables set here. The main process's pools are never touched, and
thread workers share them: capping them would slow the training step.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
import warnings
from typing import Any

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


def import_before_fork() -> None:
    """Import ``threadpoolctl`` in the main process, once, so forked workers inherit it instead
    of each importing it (5-10 ms) on the way to its first batch. Changes no thread count."""
    try:
        import threadpoolctl  # noqa: F401
    except ImportError:
        pass


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
    """Every BLAS and OpenMP library loaded here at one thread, through ``threadpoolctl``;
    False where it is not installed (BLAS and OpenMP then keep their pools)."""
    try:
        import threadpoolctl
    except ImportError:
        return False
    with warnings.catch_warnings():
        # e.g. two OpenMP runtimes loaded at once: the user's to hear about, not the loader's
        warnings.simplefilter("ignore")
        libraries = threadpoolctl.ThreadpoolController().lib_controllers
    for library in libraries:
        try:
            if not _lower_openblas_count(library):
                library.set_num_threads(1)
        except Exception as error:  # one odd build must not leave the others uncapped
            logger.debug("could not cap the threads of %s in a worker: %r", library.filepath, error)
    return True


def _lower_openblas_count(library: Any) -> bool:
    """Set OpenBLAS's thread count to 1 by writing the variable its setter writes; False
    where this is not an OpenBLAS with its own threads or the variable is not exported.

    OpenBLAS shuts its pool down before every fork, and its setter first starts the pool
    again, even to lower the count: in a forked worker that starts a thread per core that
    spins 0.1 s before it sleeps, about (cores - 1) x 0.1 s of CPU per OpenBLAS library
    (NumPy and OpenCV each bring one) per worker, on the way to the first batch. With the
    count at 1 OpenBLAS runs every call in the calling thread and never starts the pool.
    The variable (``blas_cpu_number``) has kept its name and meaning since GotoBLAS.
    """
    if library.internal_api != "openblas" or getattr(library, "threading_layer", None) != "pthreads":
        return False
    try:
        handle = ctypes.CDLL(library.filepath, mode=os.RTLD_NOLOAD)
        ctypes.c_int.in_dll(handle, "blas_cpu_number").value = 1
    except (OSError, ValueError, AttributeError):
        return False
    return True


_CAPS = (("torch", _cap_torch), ("cv2", _cap_cv2), ("BLAS/OpenMP", _cap_blas_and_openmp))
