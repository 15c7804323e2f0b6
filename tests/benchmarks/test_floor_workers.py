"""benchmarks.floor_workers: the floor's batches are the plain loop's, in order; its
workers leave nothing behind; a failing worker is an error, not a hang."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.batches import plain_batches
from benchmarks.floor_workers import FloorWorkers
from benchmarks.workloads import WORKLOADS


@pytest.mark.parametrize("workload", ["tiny", "images"])
def test_floor_batches_are_the_plain_loops_in_order(no_leaks, workload):
    spec = WORKLOADS[workload]
    dataset = spec.make(True)
    order = np.random.default_rng(1).permutation(len(dataset)).tolist()[: spec.batch_size * 12]
    expected = list(plain_batches(dataset, order, spec.batch_size))
    with FloorWorkers(dataset, order, spec.batch_size, workers=2, main_us=50) as floor:
        # Copies: a view's segment is handed back to its worker when the next batch is taken.
        got = [tuple(field.copy() for field in batch) for batch in floor]
    assert len(got) == len(expected) == 12
    for mine, plain in zip(got, expected):
        assert len(mine) == len(plain)
        for a, b in zip(mine, plain):
            assert a.dtype == b.dtype and np.array_equal(a, b)


class _Failing:
    """Tiny's samples, but sample 40 raises."""

    def __init__(self) -> None:
        self._inner = WORKLOADS["tiny"].make(True)

    def __getitem__(self, index: int):
        if index == 40:
            raise ValueError("sample 40 is broken")
        return self._inner[index]

    def __len__(self) -> int:
        return len(self._inner)


def test_a_failing_floor_worker_is_an_error_not_a_hang(no_leaks, capfd):
    dataset = _Failing()
    order = list(range(32 * 6))
    with pytest.raises(RuntimeError, match=r"worker [01] exited"):
        with FloorWorkers(dataset, order, 32, workers=2) as floor:
            for _ in floor:  # batch 1 (samples 32-63) fails in whichever worker makes it
                pass
    assert "sample 40 is broken" in capfd.readouterr().err
