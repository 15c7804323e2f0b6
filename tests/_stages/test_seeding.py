import random
import sys

import numpy as np
import pytest

from dataloader._stages.seeding import GlobalSeeding, batch_seed, seed_all, seeded_then_restored


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


def _draws() -> tuple:
    """What a batch's code may draw from the global generators (numpy's legacy normals in pairs:
    see the last test for an odd one)."""
    return random.random(), np.random.rand(), np.random.randn(4).tolist(), np.random.randint(1 << 30)


def test_global_seeding_draws_as_a_worker_seeded_by_seed_all_does():
    # Serial batches must equal the batches workers make: numpy.random draws from a bit
    # generator of the seeding's own during a batch, seeded the way seed_all seeds.
    seed_all(2**62 + 12345)
    expected = _draws()
    np.random.seed(3)
    seeding = GlobalSeeding()
    for _ in range(2):  # its bit generator is reused: the second batch is seeded afresh
        saved = seeding.seed(2**62 + 12345)
        assert _draws() == expected
        seeding.restore(saved)


def test_global_seeding_leaves_the_callers_numpy_stream_as_it_was():
    np.random.seed(8)
    expected = [np.random.rand(3).tolist() for _ in range(3)]
    np.random.seed(8)
    callers = np.random.get_bit_generator() if hasattr(np.random, "get_bit_generator") else None
    seeding, got = GlobalSeeding(), []
    for batch in range(3):
        got.append(np.random.rand(3).tolist())
        saved = seeding.seed(batch)
        np.random.rand(100)  # the batch draws
        seeding.restore(saved)
    assert got == expected
    if callers is not None:
        assert np.random.get_bit_generator() is callers


def test_a_loader_read_inside_another_ones_batch_keeps_both_streams():
    # A dataset that reads from another loader in the main process: each maker has its own
    # seeding, so the inner batch neither disturbs the outer one's draws nor the caller's.
    outer, inner = GlobalSeeding(), GlobalSeeding()
    seed_all(21)
    expected_outer = (_draws(), _draws())
    seed_all(22)
    expected_inner = _draws()
    random.seed(4)
    np.random.seed(4)
    expected_caller = _draws()
    random.seed(4)
    np.random.seed(4)
    saved_outer = outer.seed(21)
    first = _draws()
    saved_inner = inner.seed(22)
    assert _draws() == expected_inner
    inner.restore(saved_inner)
    assert (first, _draws()) == expected_outer
    outer.restore(saved_outer)
    assert _draws() == expected_caller


@pytest.mark.skipif(not hasattr(np.random, "set_bit_generator"), reason="numpy < 1.25 copies the state")
def test_global_seeding_does_not_copy_numpys_624_word_state(monkeypatch):
    # get_state/set_state of the global RandomState cost ~100 us a batch: a third of a small
    # serial batch (issue 45). The bit generator is swapped instead.
    def refused(*args, **kwargs):
        raise AssertionError("numpy.random's state was copied")

    monkeypatch.setattr(np.random, "get_state", refused)
    monkeypatch.setattr(np.random, "set_state", refused)
    seeding = GlobalSeeding()
    seeding.restore(seeding.seed(5))


@pytest.mark.skipif(not hasattr(np.random, "set_bit_generator"), reason="numpy < 1.25 copies the state")
def test_a_pending_numpy_normal_of_the_caller_is_dropped():
    # Documented (docs/design/pipeline.md, Determinism): numpy's legacy normals come in pairs and
    # the second waits in the RandomState for the next call; swapping bit generators resets it,
    # and reading it costs a get_state. The caller's stream goes on with a fresh pair.
    np.random.seed(6)
    np.random.randn()
    waiting = np.random.randn()
    np.random.seed(6)
    np.random.randn()
    seeding = GlobalSeeding()
    seeding.restore(seeding.seed(1))
    assert np.random.randn() != waiting
