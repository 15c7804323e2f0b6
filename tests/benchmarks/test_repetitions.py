"""benchmarks.repetitions: the rotating order of runs and the paired medians."""

from dataclasses import dataclass

import pytest

from benchmarks.repetitions import median, paired, paired_median, rotated, rotations


@dataclass
class _Run:
    rep: int
    rate: float


def test_each_repetition_rotates_the_order():
    assert rotated("abc", 0) == ["a", "b", "c"]
    assert rotated("abc", 1) == ["b", "c", "a"]
    assert rotated("abc", 4) == rotated("abc", 1)
    assert rotated([], 3) == []
    assert list(rotations(2, "ab")) == [(0, "a"), (0, "b"), (1, "b"), (1, "a")]


def test_median_leaves_out_none_and_nan():
    assert median([3.0, None, float("nan"), 1.0, 2.0]) == 2.0
    assert median([None, float("nan")]) is None
    assert median([]) is None


def test_ratios_are_paired_within_a_repetition():
    group = [_Run(0, 10.0), _Run(1, 30.0), _Run(2, 50.0)]
    partners = {0: _Run(0, 5.0), 1: _Run(1, 10.0)}  # rep 2 has no partner
    ratio = lambda run, other: run.rate / other.rate  # noqa: E731
    assert paired(group, partners, ratio) == [2.0, 3.0]
    assert paired_median(group, partners, ratio) == pytest.approx(2.5)
    by_parity = {0: _Run(0, 10.0), 1: _Run(1, 10.0)}
    assert paired(group, by_parity, ratio, key=lambda r: r.rep % 2) == [1.0, 3.0, 5.0]
    assert paired_median(group, {}, ratio) is None
