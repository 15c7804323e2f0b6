"""Repetitions in a rotating order, and medians of ratios paired within a repetition.

Every tool runs each of its runs once per repetition, in an order that rotates from one
repetition to the next, so that a drift of the noisy machine hits every run alike. A ratio is
formed between two runs of the same repetition, never across repetitions, and the tables
quote the median of those ratios.
"""

from __future__ import annotations

import statistics
from operator import attrgetter
from typing import Any, Callable, Hashable, Iterable, Iterator, Mapping, Sequence, TypeVar

T = TypeVar("T")
R = TypeVar("R")

#: The default pairing key: runs of the same repetition (a ``rep`` attribute) are partners.
by_rep: Callable[[Any], Hashable] = attrgetter("rep")


def rotated(items: Sequence[T], shift: int) -> list[T]:
    """``items`` rotated left by ``shift`` (modulo their number): repetition ``shift``'s order."""
    items = list(items)
    if not items:
        return items
    shift %= len(items)
    return items[shift:] + items[:shift]


def rotations(reps: int, items: Sequence[T]) -> Iterator[tuple[int, T]]:
    """``(rep, item)`` for every repetition, its items in that repetition's rotation."""
    for rep in range(reps):
        for item in rotated(items, rep):
            yield rep, item


def median(values: Iterable[float | None]) -> float | None:
    """The median of ``values`` less None and NaN; None when nothing is left."""
    kept = [v for v in values if v is not None and v == v]
    return statistics.median(kept) if kept else None


def paired(
    group: Iterable[R], partners: Mapping[Hashable, R], compare: Callable[[R, R], Any],
    key: Callable[[R], Hashable] = by_rep,
) -> list:
    """``compare(run, partner)`` for each run of ``group`` whose ``key`` has a partner."""
    return [compare(run, partners[key(run)]) for run in group if key(run) in partners]


def paired_median(
    group: Iterable[R], partners: Mapping[Hashable, R], compare: Callable[[R, R], Any],
    key: Callable[[R], Hashable] = by_rep,
) -> float | None:
    """The median of :func:`paired` (None and NaN left out)."""
    return median(paired(group, partners, compare, key))
