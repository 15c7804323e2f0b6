"""A forked worker's Arrow allocates from a pool its parent never used; a spawned one keeps its own default."""

from __future__ import annotations

import sys

import pyarrow as pa
import pytest

from dataloader import DataLoader, Dataset, SequentialSampler
from dataloader._workers.arrow_pool import use_own_arrow_pool


class PoolReport(Dataset):
    """Each sample is the name of the memory pool Arrow allocates from where it is loaded."""

    def __len__(self) -> int:
        return 2

    def __getitem__(self, index: int) -> str:
        return pa.default_memory_pool().backend_name


def _pools(context: str) -> list[str]:
    loader = DataLoader(PoolReport(), SequentialSampler(PoolReport(), batch_size=1), num_workers=1,
                        multiprocessing_context=context)
    return [name for batch in loader for name in batch]


def test_a_forked_worker_allocates_from_another_backend_than_its_parent(no_leaks):
    parent = pa.default_memory_pool().backend_name
    table = pa.table({"x": list(range(100_000))})  # the parent's pool has been used
    del table
    pools = _pools("fork")
    assert len(pools) == 2 and len(set(pools)) == 1
    assert pools[0] != parent
    assert pa.default_memory_pool().backend_name == parent  # the parent's own is left alone


@pytest.mark.timeout(120)
def test_a_spawned_worker_keeps_the_default_pool(no_leaks):
    assert _pools("spawn") == [pa.default_memory_pool().backend_name] * 2


def test_nothing_happens_where_pyarrow_was_never_imported(monkeypatch):
    monkeypatch.delitem(sys.modules, "pyarrow")
    assert use_own_arrow_pool() is None
    assert "pyarrow" not in sys.modules
