import threading

import numpy as np

from dataloader._local import using_batch_rng
from dataloader.rng import batch_rng


def test_outside_a_loader_follows_numpy_global_seed():
    np.random.seed(4)
    a = batch_rng().random()
    np.random.seed(4)
    assert batch_rng().random() == a


def test_inside_a_batch_the_generator_is_the_installed_one_per_thread():
    mine = np.random.default_rng(1)
    other = {}
    with using_batch_rng(mine):
        assert batch_rng() is mine
        thread = threading.Thread(target=lambda: other.update(rng=batch_rng()))
        thread.start()
        thread.join()
    assert other["rng"] is not mine
    assert batch_rng() is not mine


def test_a_seed_installed_as_an_int_becomes_one_generator_on_first_use():
    with using_batch_rng(5):
        first = batch_rng()
        assert first is batch_rng()
        assert first.random() == np.random.default_rng(5).random()
    assert batch_rng() is not first
