"""A worker process keeps the memory it frees for the next batch (``_workers/heap.py``): the
same allocations batch after batch fault no page in again, where glibc's defaults hand the
freed megabytes back to the kernel and fault them in anew every time."""

from __future__ import annotations

import ctypes.util
import resource

import numpy as np
import pytest

from dataloader import DataLoader, Dataset, SequentialSampler
from dataloader._workers import heap

glibc = pytest.mark.skipif(
    "libc" not in str(ctypes.util.find_library("c")) or not hasattr(ctypes.CDLL(None), "gnu_get_libc_version"),
    reason="mallopt is glibc's",
)


class Churn(Dataset):
    """Each sample allocates 16 blocks of 1 MiB, writes them, frees them, and returns the page
    faults that took in this process."""

    def __len__(self) -> int:
        return 6

    def __getitem__(self, index: int) -> np.ndarray:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        blocks = [np.ones(2**20, dtype=np.uint8) for _ in range(16)]
        del blocks
        return np.array([resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before])


@glibc
def test_a_process_worker_faults_the_memory_it_reuses_in_once(no_leaks, monkeypatch):
    for name in ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_", "GLIBC_TUNABLES"):
        monkeypatch.delenv(name, raising=False)
    loader = DataLoader(Churn(), SequentialSampler(Churn(), batch_size=1), num_workers=1, worker_type="process",
                        multiprocessing_context="fork")
    faults = [int(batch[0, 0]) for batch in loader]
    # 16 MiB is 4096 pages: the first sample faults them in; the later ones reuse them.
    assert faults[0] >= 2048, faults
    assert max(faults[1:]) < 512, faults


def test_the_users_own_malloc_settings_are_left_alone(monkeypatch):
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "131072")
    assert heap.keep_freed_memory() is False
