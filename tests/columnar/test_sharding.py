"""The epoch plan: every row to exactly one shard, balanced, the same in every process."""

from __future__ import annotations

import collections
import pickle

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dataloader.columnar._planner import Planner
from dataloader.columnar._sharding import Layout, Piece, plan_epoch, shard_range, unit_order

FAST = settings(max_examples=150, deadline=None)

counts_st = st.lists(st.integers(0, 40), min_size=1, max_size=12)
worlds = st.integers(1, 4)
batch_sizes = st.integers(1, 8)


def rows_of(pieces: list[Piece]) -> list[tuple[int, int]]:
    return [(p.unit, row) for p in pieces for row in range(p.start, p.stop)]


def shards(plan, layout: Layout, workers: list[int]) -> dict[tuple[int, int], list[tuple[int, int]]]:
    """(rank, worker) -> the rows it reads, in order; rank r has workers[r] workers."""
    out = {}
    for rank in range(layout.world_size):
        for worker in range(workers[rank]):
            lo, hi = shard_range(plan, layout.batch_size, rank, worker, workers[rank])
            out[rank, worker] = rows_of(plan.pieces(lo, hi))
    return out


def all_rows(counts) -> collections.Counter:
    return collections.Counter((unit, row) for unit, n in enumerate(counts) for row in range(n))


def batches(rows: list, size: int) -> list[tuple]:
    return [tuple(rows[i : i + size]) for i in range(0, len(rows), size)]


@FAST
@given(counts=counts_st, world=worlds, size=batch_sizes, shuffle=st.booleans(), seed=st.integers(0, 2**64 - 1),
       epoch=st.integers(0, 50), data=st.data())
def test_every_row_goes_to_exactly_one_shard(counts, world, size, shuffle, seed, epoch, data):
    workers = data.draw(st.lists(st.integers(1, 4), min_size=world, max_size=world))  # ranks may differ
    layout = Layout(tuple(counts), world, size, shuffle, seed)
    plan = plan_epoch(layout, epoch)
    read = shards(plan, layout, workers)
    assert collections.Counter(r for rows in read.values() for r in rows) == all_rows(counts)
    # The batches are those one process reading everything makes: only the epoch's last is short.
    alone = batches(rows_of(plan.pieces(0, plan.rows)), size)
    assert sorted(b for rows in read.values() for b in batches(rows, size)) == sorted(alone)
    # Balanced: ranks, and the workers of a rank, differ by at most one batch.
    per_rank = [-(-(plan.bound(r + 1) - plan.bound(r)) // size) for r in range(world)]
    assert max(per_rank) - min(per_rank) <= 1
    for rank in range(world):
        mine = [len(batches(read[rank, w], size)) for w in range(workers[rank])]
        assert max(mine) - min(mine) <= 1
    if len(alone) >= world * max(workers):  # enough batches: no shard is starved
        assert all(read.values())


@FAST
@given(counts=counts_st, world=worlds, size=batch_sizes, shuffle=st.booleans(), seed=st.integers(0, 1000),
       workers=st.integers(1, 4))
def test_equal_gives_every_rank_the_same_full_batches(counts, world, size, shuffle, seed, workers):
    layout = Layout(tuple(counts), world, size, shuffle, seed, equal=True)
    plan = plan_epoch(layout, 0)
    read = shards(plan, layout, [workers] * world)
    quota = sum(counts) // size // world * size
    for rank in range(world):
        rows = [r for w in range(workers) for r in read[rank, w]]
        assert len(rows) == quota
        assert all(len(read[rank, w]) % size == 0 for w in range(workers))  # full batches only
    surplus = rows_of([Piece(*map(int, p)) for p in plan.surplus])
    assert plan.surplus_rows == len(surplus) == sum(counts) - world * quota < world * size
    delivered = collections.Counter(r for rows in read.values() for r in rows) + collections.Counter(surplus)
    assert delivered == all_rows(counts)


@FAST
@given(counts=st.lists(st.integers(0, 30), min_size=1, max_size=8).filter(lambda c: sum(c) > 0),
       world=worlds, size=batch_sizes, shuffle=st.booleans(), epochs=st.integers(1, 6))
def test_carry_loses_nothing_over_epochs(counts, world, size, shuffle, epochs):
    layout = Layout(tuple(counts), world, size, shuffle, seed=3, equal=True, carry=True)
    planner = Planner(layout)
    delivered: collections.Counter = collections.Counter()
    previous = None
    for epoch in range(epochs):
        plan = planner.plan(epoch)
        assert plan.carried_in == (previous.surplus_rows if previous else 0)
        assert plan.surplus_rows < world * size
        delivered.update(rows_of(plan.pieces(0, plan.bound(plan.world_size))))
        previous = plan
    delivered.update(rows_of([Piece(*map(int, p)) for p in previous.surplus]))
    assert delivered == collections.Counter({row: epochs for row in all_rows(counts)})


def test_a_fresh_planner_arrives_at_the_same_carried_plan():
    layout = Layout((7, 3, 12, 5), world_size=3, batch_size=4, shuffle=True, seed=9, equal=True, carry=True)
    walked = Planner(layout)
    for epoch in range(6):
        walked.plan(epoch)
    for fresh in (Planner(layout), pickle.loads(pickle.dumps(walked))):
        jumped = fresh.plan(5)
        assert np.array_equal(jumped.sequence, walked.plan(5).sequence)
        assert [jumped.bound(r) for r in range(4)] == [walked.plan(5).bound(r) for r in range(4)]
    back = walked.plan(2)  # going back replays from epoch 0
    assert np.array_equal(back.sequence, Planner(layout).plan(2).sequence)


def test_unit_order_is_seeded_by_seed_and_epoch():
    assert unit_order(5, False, 1, 3).tolist() == [0, 1, 2, 3, 4]
    orders = {tuple(unit_order(20, True, seed, epoch)) for seed in range(5) for epoch in range(5)}
    assert len(orders) == 25
    assert unit_order(20, True, 7, 2).tolist() == unit_order(20, True, 7, 2).tolist()
    assert sorted(unit_order(20, True, 7, 2)) == list(range(20))


def test_fewer_units_than_shards_splits_units_by_rows():
    layout = Layout((10,), world_size=2, batch_size=1)
    plan = plan_epoch(layout, 0)
    pieces = [plan.pieces(*shard_range(plan, 1, rank, worker, 3)) for rank in range(2) for worker in range(3)]
    assert [sum(p.stop - p.start for p in ps) for ps in pieces] == [1, 2, 2, 1, 2, 2]
    assert [ps[0].unit for ps in pieces] == [0] * 6


def test_empty_units_are_skipped():
    plan = plan_epoch(Layout((0, 5, 0, 0, 3, 0)), 0)
    assert plan.pieces(0, plan.rows) == [Piece(1, 0, 5), Piece(4, 0, 3)]
    assert plan.pieces(5, 8) == [Piece(4, 0, 3)]
    assert plan.pieces(3, 3) == []
    assert plan_epoch(Layout((0, 0)), 0).pieces(0, 0) == []


def test_a_plan_costs_nothing_per_rank():
    world = 2**24  # MAX_WORLD_SIZE: a loop over the ranks would take seconds here, and memory
    plan = plan_epoch(Layout((5, 7), world_size=world, batch_size=2), 0)
    ranges = [shard_range(plan, 2, rank, 0, 1) for rank in (0, 1, 5, world - 1)]
    assert ranges == [(0, 0), (0, 0), (0, 0), (10, 12)]
    assert plan.surplus_rows == 0
