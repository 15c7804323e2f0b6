import random
import sys

import numpy as np

from dataloader._stages.seeding import batch_seed, seed_all, seeded_then_restored


def test_batch_seed_is_a_pure_function_of_its_inputs():
    assert batch_seed(1, 2, 3) == batch_seed(1, 2, 3)
    seeds = {batch_seed(1, epoch, index) for epoch in range(5) for index in range(50)}
    assert len(seeds) == 250
    assert batch_seed(1, 0, 0) != batch_seed(2, 0, 0)
    assert 0 <= batch_seed(2**63, 7, 9) < 2**63


def test_seed_all_seeds_python_and_numpy():
    seed_all(123)
    first = (random.random(), np.random.rand())
    seed_all(123)
    assert (random.random(), np.random.rand()) == first


def test_seeded_then_restored_puts_state_back():
    random.seed(5)
    np.random.seed(5)
    expected = (random.random(), np.random.rand())
    random.seed(5)
    np.random.seed(5)
    with seeded_then_restored(99):
        inside = (random.random(), np.random.rand())
    assert (random.random(), np.random.rand()) == expected
    with seeded_then_restored(99):
        assert (random.random(), np.random.rand()) == inside


def test_torch_is_not_imported_by_seeding():
    if "torch" in sys.modules:
        return  # another test imported it; nothing to check here
    seed_all(1)
    assert "torch" not in sys.modules
