"""Epoch plans in turn, with the reshards of a run whose world size changed replayed.

A reshard happens when a run saved by ``W`` ranks in the middle of epoch ``e``
resumes on ``W'`` ranks (``load_state_dict`` given every old rank's state).
It is recorded as a :class:`Reshard` (the epoch, the old world, the rows each
old rank had delivered), and every process replays the history the same way,
from row counts alone:

- Old rank ``r``'s remaining rows are the rows of its block after the ``rows[r]``
  it delivered, in the order it would have delivered them: with a shuffle
  buffer, the rest of the window in progress in its permuted order, then the
  rest of the block.
- The old ranks' remainders, in rank order, are the epoch's new sequence, cut
  between the ``W'`` ranks as :func:`~._sharding.planned` cuts any epoch
  (blocks of whole batches; with ``equal`` the same number for every rank).
- The surplus is the old world's (pending: it was never any rank's) and then
  what the new cut leaves over: dropped, or carried to the next epoch.

A resharded epoch can be resharded again (``W -> W' -> W''``); each step
raises the plan's ``generation``, which keys its shuffle windows. With
``carry`` each epoch's plan depends on the one before, so the history keeps
the reshards of every epoch and the world each epoch began with.
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

import numpy as np

from ..errors import ArgumentValueError
from ._sharding import NO_PIECES, EpochPlan, Layout, plan_epoch, planned, window_rng


class Reshard(NamedTuple):
    """Epoch ``epoch`` resumed on another world after ``world_size`` ranks had delivered ``rows``."""

    epoch: int
    world_size: int  # the world that delivered `rows` (the world the epoch ran on until then)
    rows: tuple[int, ...]  # rows each of its ranks had delivered, in rank order


class Planner:
    """Plans epochs for one layout and a history of reshards; with ``carry`` each plan depends
    on the one before.

    A carried plan is rebuilt from epoch 0 (or from the last plan made here),
    so any process asked for any epoch arrives at the same answer.
    """

    def __init__(self, layout: Layout, history: tuple[Reshard, ...] = ()) -> None:
        self.layout = layout
        self.history = tuple(history)
        self._last: EpochPlan | None = None

    def plan(self, epoch: int) -> EpochPlan:
        if not self.layout.carry:
            return self._plan(epoch, NO_PIECES)
        last = self._last
        if last is not None and last.epoch == epoch:
            return last
        start, carried = 0, NO_PIECES
        if last is not None and last.epoch < epoch:  # carry on from the last plan made here
            start, carried = last.epoch + 1, last.surplus
        for number in range(start, epoch + 1):
            last = self._plan(number, carried)
            carried = last.surplus
        self._last = last
        return last  # type: ignore[return-value]

    def _plan(self, epoch: int, carried: np.ndarray) -> EpochPlan:
        """Epoch ``epoch`` on the world it began with, then through its reshards in turn."""
        history = self.history
        began = next((step.world_size for step in history if step.epoch >= epoch), self.layout.world_size)
        plan = plan_epoch(replace(self.layout, world_size=began), epoch, carried)
        for index, step in enumerate(history):
            if step.epoch == epoch:
                after = history[index + 1].world_size if index + 1 < len(history) else self.layout.world_size
                plan = reshard(plan, step, after, self.layout)
        return plan

    def __getstate__(self) -> dict:
        return {"layout": self.layout, "history": self.history, "_last": None}  # _last: a cache


def reshard(plan: EpochPlan, step: Reshard, world_size: int, layout: Layout) -> EpochPlan:
    """``plan`` after ``step``: the old ranks' remaining rows, cut between ``world_size`` ranks."""
    if len(step.rows) != plan.world_size:
        raise ArgumentValueError(
            f"a reshard of epoch {step.epoch} records {len(step.rows)} ranks' rows, but the epoch ran on "
            f"{plan.world_size} ranks then. Pass the states as the ranks' state_dict() returned them."
        )
    parts = [remainder(plan, rank, done, layout) for rank, done in enumerate(step.rows)]
    sequence = np.concatenate(parts) if parts else NO_PIECES
    return planned(plan.epoch, sequence, world_size, layout, plan.carried_in, plan.surplus, plan.generation + 1)


def remainder(plan: EpochPlan, rank: int, done: int, layout: Layout) -> np.ndarray:
    """The pieces rank ``rank`` of ``plan`` had still to deliver after ``done`` rows, in its order
    (its main process reading: worker 0 of 1)."""
    lo, hi = plan.bound(rank), plan.bound(rank + 1)
    if done > hi - lo:
        raise ArgumentValueError(
            f"the state of rank {rank} counts {done} rows delivered in epoch {plan.epoch}, but that rank's "
            f"share of the epoch holds {hi - lo}: the states are not of this stream's epoch. Pass the "
            "states the ranks' streams returned at the same step, in rank order."
        )
    size, start = layout.shuffle_buffer, lo + done
    parts: list[np.ndarray] = []
    if size > 1 and done % size:  # a window in progress: its rest, as it was permuted
        window = done // size
        first = lo + window * size
        stop = min(first + size, hi)
        order = window_rng(layout.seed, plan.epoch, rank, 0, window, plan.generation).permutation(stop - first)
        parts.append(rows_as_pieces(plan, first + order[done % size :]))
        start = stop
    parts.append(plan.cut(start, hi))
    return np.concatenate(parts)


def rows_as_pieces(plan: EpochPlan, positions: np.ndarray) -> np.ndarray:
    """Rows of ``plan``'s sequence at ``positions`` (in that order) as pieces, runs of
    consecutive rows of one unit joined into one piece."""
    if not len(positions):
        return NO_PIECES
    index = np.searchsorted(plan.offsets, positions, side="right") - 1
    units = plan.sequence[index, 0]
    rows = plan.sequence[index, 1] + positions - plan.offsets[index]
    breaks = np.flatnonzero((np.diff(units) != 0) | (np.diff(rows) != 1)) + 1
    starts = np.concatenate([[0], breaks])
    ends = np.concatenate([breaks, [len(positions)]])
    return np.stack([units[starts], rows[starts], rows[ends - 1] + 1], axis=1).astype(np.int64)
