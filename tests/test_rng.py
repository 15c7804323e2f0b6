import threading

import numpy as np

from dataloader.rng import _using, batch_rng


def test_outside_a_loader_follows_numpy_global_seed():
    np.random.seed(4)
    a = batch_rng().random()
    np.random.seed(4)
    assert batch_rng().random() == a


def test_inside_a_batch_the_generator_is_the_installed_one_per_thread():
    mine = np.random.default_rng(1)
    other = {}
    with _using(mine):
        assert batch_rng() is mine
        thread = threading.Thread(target=lambda: other.update(rng=batch_rng()))
        thread.start()
        thread.join()
    assert other["rng"] is not mine
    assert batch_rng() is not mine
