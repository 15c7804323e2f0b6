"""Process workers cap the native thread pools at one thread; the main process and thread
workers keep theirs.

Each test first raises the main process's pools to 2 threads (and the variables a spawned
child reads to 2), so a worker that inherited or re-created its pools unchanged would report
2 where the cap makes it 1, on any machine.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import os

import numpy as np
import pytest

from dataloader import DataLoader, Dataset, SequentialSampler
from dataloader._workers import native_threads
from dataloader._workers.native_threads import THREAD_VARIABLES, use_one_native_thread

HAS_TORCH = importlib.util.find_spec("torch") is not None
if HAS_TORCH:
    import torch
# The test extra installs OpenCV and threadpoolctl; free-threaded 3.14t has no OpenCV wheel.
cv2 = pytest.importorskip("cv2", reason="these tests read OpenCV's thread count; OpenCV is not installed here")
import threadpoolctl  # noqa: E402


def blas_threads() -> int:
    """The most threads any BLAS loaded in this process may use."""
    return max(lib["num_threads"] for lib in threadpoolctl.threadpool_info() if lib["user_api"] == "blas")


def torch_threads() -> int:
    return torch.get_num_threads() if HAS_TORCH else -1


class Pools(Dataset):
    """Each sample reports the pools of the process (or thread) that made it."""

    def __len__(self) -> int:
        return 8

    def __getitem__(self, index: int) -> np.ndarray:
        return np.array(
            [torch_threads(), blas_threads(), cv2.getNumThreads(), int(os.environ.get("OMP_NUM_THREADS", -1))]
        )


@contextlib.contextmanager
def two_threads_everywhere(monkeypatch):
    """The main process's pools at 2 threads, and 2 in what a spawned worker reads at start."""
    for name in THREAD_VARIABLES:
        monkeypatch.setenv(name, "2")
    torch_before = torch_threads()
    cv2_before = cv2.getNumThreads()
    if HAS_TORCH:
        torch.set_num_threads(2)
    cv2.setNumThreads(2)
    try:
        with threadpoolctl.threadpool_limits(limits=2):
            yield
    finally:
        cv2.setNumThreads(cv2_before)
        if HAS_TORCH:
            torch.set_num_threads(torch_before)


def pools_seen(**options) -> np.ndarray:
    """One row per sample: torch, BLAS, OpenCV threads and OMP_NUM_THREADS where it was made."""
    loader = DataLoader(Pools(), SequentialSampler(Pools(), batch_size=2), num_workers=2, **options)
    return np.concatenate(list(loader))


def test_process_workers_cap_blas_opencv_and_the_environment(start_method, monkeypatch, no_leaks):
    with two_threads_everywhere(monkeypatch):
        seen = pools_seen(multiprocessing_context=start_method)
        assert (blas_threads(), cv2.getNumThreads(), os.environ["OMP_NUM_THREADS"]) == (2, 2, "2")
    assert seen.shape == (8, 4)
    assert (seen[:, 1] == 1).all(), "BLAS"
    assert (seen[:, 2] == 1).all(), "OpenCV"
    assert (seen[:, 3] == 1).all(), "OMP_NUM_THREADS"


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed (pip install torch)")
@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_process_workers_cap_torch_as_pytorch_does(method, monkeypatch, no_leaks):
    with two_threads_everywhere(monkeypatch):
        seen = pools_seen(multiprocessing_context=method)
        assert torch.get_num_threads() == 2  # the main process keeps its pool
    assert (seen[:, 0] == 1).all()


class Convolutions(Dataset):
    """A PyTorch convolution per sample: oneDNN runs it on GNU OpenMP's thread pool."""

    def __init__(self) -> None:
        rng = np.random.default_rng(0)
        self.images = torch.from_numpy(rng.standard_normal((4, 3, 64, 64), dtype=np.float32))
        self.weight = torch.from_numpy(rng.standard_normal((8, 3, 3, 3), dtype=np.float32))

    def __len__(self) -> int:
        return 8

    def __getitem__(self, index: int) -> np.ndarray:
        return torch.nn.functional.conv2d(self.images[index % 4][None], self.weight, padding=1)[0].numpy()


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed (pip install torch)")
def test_forked_workers_do_not_hang_on_an_openmp_pool_the_parent_used(monkeypatch, no_leaks):
    """GNU OpenMP is not fork-safe: a forked child that enters a parallel region with the pool
    the parent started waits forever for threads that were not forked. One thread per worker
    never enters one. Without the cap this loader timed out here (and hung with no timeout)."""
    dataset = Convolutions()
    with two_threads_everywhere(monkeypatch):
        expected = np.stack([dataset[i] for i in range(8)])  # the parent's pool runs
        loader = DataLoader(dataset, SequentialSampler(dataset, batch_size=2), num_workers=2,
                            multiprocessing_context="fork", timeout=20)
        got = np.concatenate(list(loader))
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def openblas_pools_running() -> int:
    """How many OpenBLAS libraries loaded here have their thread pool up (OpenBLAS's own
    ``blas_server_avail`` flag); -1 where a library does not export it."""
    running = 0
    for library in threadpoolctl.ThreadpoolController().select(internal_api="openblas").lib_controllers:
        try:
            handle = ctypes.CDLL(library.filepath, mode=os.RTLD_NOLOAD)
            running += ctypes.c_int.in_dll(handle, "blas_server_avail").value != 0
        except (OSError, ValueError):
            return -1
    return running


class ThreadedMatmul(Dataset):
    """Each sample, after a matmul large enough for OpenBLAS to split across its pool: how many
    OpenBLAS pools are up in the worker that made it, and its BLAS threads."""

    def __len__(self) -> int:
        return 8

    def __getitem__(self, index: int) -> np.ndarray:
        square = np.ones((256, 256))
        square @ square
        return np.array([openblas_pools_running(), blas_threads()])


def test_forked_workers_cap_openblas_without_restarting_its_pool(monkeypatch, no_leaks):
    """OpenBLAS shuts its pool down before a fork and its setter starts it again, even to lower
    the count: a thread per core in every worker, each spinning 0.1 s. The count written
    directly leaves the pool down: the workers run BLAS in their own thread."""
    if openblas_pools_running() < 0:
        pytest.skip("this OpenBLAS does not export blas_server_avail, so its pool cannot be seen")
    dataset = ThreadedMatmul()
    with two_threads_everywhere(monkeypatch):
        (np.ones((256, 256)) @ np.ones((256, 256)))  # the parent's pool runs
        assert openblas_pools_running() > 0
        seen = np.concatenate(list(DataLoader(dataset, SequentialSampler(dataset, batch_size=2),
                                              num_workers=2, multiprocessing_context="fork")))
    assert (seen[:, 1] == 1).all()
    assert (seen[:, 0] == 0).all(), "a worker restarted an OpenBLAS pool"


def test_openblas_without_its_count_exported_is_capped_through_its_setter(monkeypatch, no_leaks):
    monkeypatch.setattr(native_threads, "_lower_openblas_count", lambda library: False)
    with two_threads_everywhere(monkeypatch):
        seen = pools_seen(multiprocessing_context="fork")
    assert (seen[:, 1] == 1).all()


def test_the_main_process_never_touches_its_own_pools(start_method, monkeypatch, no_leaks):
    """Capping (or scanning) the main process's pools around a fork and giving them back
    restarted its OpenBLAS pool at every epoch start: 0.1 s of a spinning thread per core."""
    scanned_in_main = []
    scan = threadpoolctl.ThreadpoolController.__init__
    main = os.getpid()

    def spy(self, *args, **kwargs):
        if os.getpid() == main:
            scanned_in_main.append(True)
        scan(self, *args, **kwargs)

    dataset = ThreadedMatmul()
    with two_threads_everywhere(monkeypatch):
        monkeypatch.setattr(threadpoolctl.ThreadpoolController, "__init__", spy)
        loader = DataLoader(dataset, SequentialSampler(dataset, batch_size=2), num_workers=2,
                            multiprocessing_context=start_method)
        seen = np.concatenate(list(loader))
        monkeypatch.setattr(threadpoolctl.ThreadpoolController, "__init__", scan)
        assert blas_threads() == 2
    assert not scanned_in_main
    assert (seen[:, 1] == 1).all()


def test_worker_init_fn_may_raise_a_count_again(monkeypatch, no_leaks):
    def more_threads(worker_id: int) -> None:
        threadpoolctl.threadpool_limits(limits=2)
        cv2.setNumThreads(2)

    with two_threads_everywhere(monkeypatch):
        seen = pools_seen(worker_init_fn=more_threads, multiprocessing_context="fork")
    assert (seen[:, 1] == 2).all() and (seen[:, 2] == 2).all()


def test_thread_workers_share_the_main_process_pools_untouched(monkeypatch, no_leaks):
    with two_threads_everywhere(monkeypatch):
        seen = pools_seen(worker_type="thread")
        assert (blas_threads(), cv2.getNumThreads()) == (2, 2)
    assert (seen[:, 1] == 2).all() and (seen[:, 2] == 2).all() and (seen[:, 3] == 2).all()


def test_a_library_that_refuses_is_skipped_not_fatal(monkeypatch):
    for name in THREAD_VARIABLES:
        monkeypatch.setenv(name, "8")  # restored after the test: the cap writes them

    def refuses() -> bool:
        raise RuntimeError("set_num_threads is not supported by this build")

    caps = (("broken", refuses), ("fine", lambda: True), ("absent", lambda: False))
    monkeypatch.setattr(native_threads, "_CAPS", caps)
    assert use_one_native_thread() == ["fine"]
    assert all(os.environ[name] == "1" for name in THREAD_VARIABLES)
