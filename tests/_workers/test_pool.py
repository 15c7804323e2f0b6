"""The worker pool forks workers with the parent's heap frozen out of the garbage collector's reach."""

from __future__ import annotations

import gc

import numpy as np

from dataloader import DataLoader, Dataset, SequentialSampler


class GcReport(Dataset):
    """Each sample reports, from the process that loads it, how many objects its collector would
    visit in a full collection and how many it was handed frozen."""

    def __len__(self) -> int:
        return 4

    def __getitem__(self, index: int) -> np.ndarray:
        return np.array([len(gc.get_objects()), gc.get_freeze_count()])


def _reports(loader: DataLoader) -> np.ndarray:
    return np.concatenate([batch for batch in loader])


def test_forked_workers_do_not_collect_the_parents_heap(heap_unfrozen, no_leaks):
    parent_objects = len(gc.get_objects())
    loader = DataLoader(GcReport(), SequentialSampler(GcReport(), batch_size=1), num_workers=2,
                        multiprocessing_context="fork")
    reports = _reports(loader)
    visited, frozen = reports[:, 0], reports[:, 1]
    # A worker's collector visits only what the worker made itself, not the heap it inherited.
    assert (visited < parent_objects / 10).all(), f"workers visit {visited} objects; the parent has {parent_objects}"
    assert (frozen >= parent_objects / 2).all()
    assert gc.get_freeze_count() == 0, "the parent's objects were left frozen"


def test_a_program_that_froze_its_own_objects_keeps_them_frozen(heap_unfrozen, no_leaks):
    # The freeze count is no witness: frozen objects that die leave it. An object still frozen
    # is in none of the collector's generations, which is what gc.get_objects() lists.
    kept = [object()]
    gc.freeze()
    try:
        loader = DataLoader(GcReport(), SequentialSampler(GcReport(), batch_size=1), num_workers=1,
                            multiprocessing_context="fork")
        _reports(loader)
        assert all(o is not kept for o in gc.get_objects()), "the loader unfroze the program's own frozen objects"
    finally:
        gc.unfreeze()
    assert any(o is kept for o in gc.get_objects())  # the check above can see an unfrozen object
