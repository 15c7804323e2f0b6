"""Resuming a map dataset's epoch on another number of ranks (issue 48): every sample no old
rank handed out comes once over the new world, in the order of the global permutation, padded
for the new world; with the same global batch, the global batches of an uninterrupted run."""

import collections
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataloader import (
    ArrayDataset,
    BucketSampler,
    DataLoader,
    Infinite,
    RandomSampler,
    ReplacementSampler,
    SequentialSampler,
)
from dataloader.errors import ArgumentValueError

FAST = settings(max_examples=40, deadline=None)
SEED = 5


def _sampler(kind, data, world, rank, batch, drop_last=False):
    if kind == "random":
        return RandomSampler(data, batch_size=batch, drop_last=drop_last, world_size=world, rank=rank, seed=SEED)
    if kind == "sequential":
        return SequentialSampler(data, batch_size=batch, drop_last=drop_last, world_size=world, rank=rank)
    return ReplacementSampler(data, batch_size=batch, drop_last=drop_last, world_size=world, rank=rank, seed=SEED)


def _ids(batch):
    return batch[0].tolist()


def _run(loaders, take=None):
    """Each loader's batches (lists of ids), ``take`` of them each (None: the rest of the epoch)."""
    out = []
    for loader in loaders:
        it = iter(loader)
        out.append([_ids(b) for b in (it if take is None else (next(it) for _ in range(take)))])
    return out


def _epoch_order(kind, data):
    """The epoch's global list (world 1 reads it whole, in order)."""
    return np.asarray(_sampler(kind, data, 1, 0, 1).sample()).tolist()


def _check_rest(order, before, after_ranks, world_after):
    """``after_ranks`` (each new rank's flat ids) is the rest of ``order`` after ``before`` (the ids
    the old ranks handed out, as positions of ``order``), shared out as rank r' taking positions
    r', r' + W', ... of the rest padded by wrap-around."""
    rest = [unit for position, unit in enumerate(order) if position not in before]
    per_rank = -(-len(rest) // world_after)
    for rank, flat in enumerate(after_ranks):
        expected = [rest[(rank + world_after * j) % len(rest)] for j in range(per_rank)] if rest else []
        assert flat == expected


def _handed_positions(world, batch, taken):
    """Positions of the global list the old ranks' first ``taken`` batches covered."""
    return {r + world * j for r in range(world) for j in range(taken * batch)}


@FAST
@given(
    kind=st.sampled_from(["random", "sequential", "replacement"]),
    n=st.integers(1, 80),
    world=st.integers(1, 8),
    batch=st.integers(1, 5),
    world_after=st.integers(1, 8),
    batch_after=st.integers(1, 5),
    data=st.data(),
)
def test_the_rest_of_the_epoch_comes_once_over_any_new_world(kind, n, world, batch, world_after, batch_after, data):
    dataset = ArrayDataset(np.arange(n))
    olds = [DataLoader(dataset, _sampler(kind, dataset, world, r, batch)) for r in range(world)]
    length = len(olds[0])
    taken = data.draw(st.integers(0, length))
    before = _run(olds, taken)
    states = [old.state_dict() for old in olds]
    news = [DataLoader(dataset, _sampler(kind, dataset, world_after, r, batch_after)) for r in range(world_after)]
    for new in news:
        new.load_state_dict(states)
    after = _run(news)
    assert len({len(batches) for batches in after}) == 1  # every new rank as many batches
    if taken == length or (world_after, batch_after) == (world, batch):
        # The epoch's end (the state points at the next epoch's start), or the same world: exact.
        for r, new in enumerate(after):
            plain = _sampler(kind, dataset, world_after, r, batch_after)
            plain.set_epoch(1 if taken == length else 0)
            assert new == list(plain)[0 if taken == length else taken :]
        return
    padded = -(-n // world) * world
    handed = {p % n for p in _handed_positions(world, batch, taken) if p < padded}
    _check_rest(_epoch_order(kind, dataset), handed, [sum(batches, []) for batches in after], world_after)
    if kind != "replacement":  # distinct ids: each one once, plus the padding of each world
        flat_before, flat_after = sum(sum(before, []), []), sum(sum(after, []), [])
        assert set(flat_before) | set(flat_after) == set(range(n))


@FAST
@given(n=st.integers(8, 90), world=st.integers(1, 6), batch=st.integers(1, 4), factor=st.sampled_from([1, 2]), data=st.data())
def test_the_same_global_batch_gives_the_global_batches_of_an_uninterrupted_run(n, world, batch, factor, data):
    dataset = ArrayDataset(np.arange(n))
    # The new world has `factor` times fewer ranks, each `factor` times the batch (where it divides).
    if world % factor:
        factor = 1
    world_after, batch_after = world // factor, batch * factor
    olds = [DataLoader(dataset, _sampler("random", dataset, world, r, batch)) for r in range(world)]
    uninterrupted = _run([DataLoader(dataset, _sampler("random", dataset, world, r, batch)) for r in range(world)])
    taken = data.draw(st.integers(0, len(olds[0]) - 1))
    _run(olds, taken)
    states = [old.state_dict() for old in olds]
    news = [DataLoader(dataset, _sampler("random", dataset, world_after, r, batch_after)) for r in range(world_after)]
    for new in news:
        new.load_state_dict(states)
    after = _run(news)
    for k in range(len(after[0]) - 1):  # all but the epoch's last, which has the new world's padding
        got = sorted(sum((after[r][k] for r in range(world_after)), []))
        assert got == sorted(sum((uninterrupted[r][taken + k] for r in range(world)), []))


def test_one_ranks_state_speaks_for_every_rank_of_a_synchronous_run():
    dataset = ArrayDataset(np.arange(50))
    olds = [DataLoader(dataset, _sampler("random", dataset, 4, r, 3)) for r in range(4)]
    _run(olds, 2)
    every = [old.state_dict() for old in olds]
    for rank_state in every:
        by_one = [DataLoader(dataset, _sampler("random", dataset, 3, r, 2)) for r in range(3)]
        by_all = [DataLoader(dataset, _sampler("random", dataset, 3, r, 2)) for r in range(3)]
        for one, all_ in zip(by_one, by_all):
            one.load_state_dict(rank_state)
            all_.load_state_dict(every)
        assert _run(by_one) == _run(by_all)


@pytest.mark.parametrize("workers_before, workers_after", [(0, 2), (2, 0)])
def test_workers_out_of_order_and_a_chain_of_worlds_lose_and_repeat_nothing(workers_before, workers_after):
    n = 61
    dataset = ArrayDataset(np.arange(n))

    def loaders(world, batch, workers):
        return [
            DataLoader(dataset, _sampler("random", dataset, world, r, batch), num_workers=workers, in_order=False)
            for r in range(world)
        ]

    seen = []
    worlds = [(4, 2, workers_before), (3, 3, workers_after), (2, 1, workers_before)]
    states = None
    for step, (world, batch, workers) in enumerate(worlds):
        group = loaders(world, batch, workers)
        for loader in group:
            if states is not None:
                loader.load_state_dict(states)
        take = None if step == len(worlds) - 1 else 2
        for loader in group:
            it = iter(loader)
            batches = list(it) if take is None else [next(it) for _ in range(take)]
            seen += sum((_ids(b) for b in batches), [])
            if take is not None:
                it.close()
        states = [loader.state_dict() for loader in group]
        for loader in group:
            loader.close()
    counts = collections.Counter(seen)
    assert set(counts) == set(range(n))
    # Each world pads its share with at most world - 1 copies: nothing else comes twice.
    assert sum(counts.values()) - n <= sum(world - 1 for world, _, _ in worlds)


def test_a_state_taken_on_the_new_world_resumes_it_exactly():
    dataset = ArrayDataset(np.arange(70))
    olds = [DataLoader(dataset, _sampler("random", dataset, 4, r, 2)) for r in range(4)]
    _run(olds, 3)
    states = [old.state_dict() for old in olds]
    new = DataLoader(dataset, _sampler("random", dataset, 2, 1, 4))
    new.load_state_dict(states)
    assert new.state_dict()["config"]["world_size"] == 2  # a state of this world, before any batch
    it = iter(new)
    first = [_ids(next(it)) for _ in range(2)]
    midway = new.state_dict()
    rest = [_ids(b) for b in it]
    again = DataLoader(dataset, _sampler("random", dataset, 2, 1, 4), num_workers=2)
    again.load_state_dict(midway)
    assert [_ids(b) for b in again] == rest
    assert first  # and the epoch after is a plain epoch of the new world
    fresh = DataLoader(dataset, _sampler("random", dataset, 2, 1, 4))
    fresh.set_epoch(1)
    assert [_ids(b) for b in new] == [_ids(b) for b in fresh]


def test_repeats_count_a_half_echoed_batch_as_handed_out():
    dataset = ArrayDataset(np.arange(40))
    olds = [DataLoader(dataset, _sampler("sequential", dataset, 2, r, 4), repeats=2) for r in range(2)]
    seen = []
    for old in olds:
        it = iter(old)
        seen += sum((_ids(next(it)) for _ in range(3)), [])  # batch 1 echoed once of twice
    states = [old.state_dict() for old in olds]
    assert states[0]["partial"]
    news = [DataLoader(dataset, _sampler("sequential", dataset, 4, r, 2), repeats=2) for r in range(4)]
    after = []
    for new in news:
        new.load_state_dict(states)
        after += sum((_ids(b) for b in new), [])
    assert set(seen).isdisjoint(after) and set(seen) | set(after) == set(range(40))
    assert collections.Counter(after) == collections.Counter({i: 2 for i in set(after)})  # echoed


def test_bucket_batches_left_come_once_over_the_new_world():
    n = 300
    lengths = np.random.default_rng(0).integers(1, 60, n)
    dataset = ArrayDataset(np.arange(n))

    def sampler(world, rank):
        return BucketSampler(dataset, lengths, max_tokens=120, seed=2, world_size=world, rank=rank)

    olds = [DataLoader(dataset, sampler(3, r)) for r in range(3)]
    before = sum((sum(b, []) for b in _run(olds, 4)), [])
    states = [old.state_dict() for old in olds]
    news = [DataLoader(dataset, sampler(5, r)) for r in range(5)]
    for new in news:
        new.load_state_dict(states)
    after_batches = _run(news)
    assert len({len(b) for b in after_batches}) == 1
    after = sum((sum(b, []) for b in after_batches), [])
    # max_tokens: no index repeats, budgets hold in the new world's batches too
    assert sorted(before + after) == list(range(n))
    assert all(len(b) * lengths[b].max() <= 120 for batches in after_batches for b in batches)


def test_bucket_batches_of_a_fixed_size_pad_the_new_world_and_keep_their_batch_size():
    n = 100
    lengths = np.random.default_rng(1).integers(1, 30, n)
    dataset = ArrayDataset(np.arange(n))

    def sampler(world, rank, batch_size=4):
        return BucketSampler(dataset, lengths, batch_size=batch_size, seed=3, world_size=world, rank=rank)

    olds = [DataLoader(dataset, sampler(3, r)) for r in range(3)]
    before = sum((sum(b, []) for b in _run(olds, 2)), [])
    states = [old.state_dict() for old in olds]
    news = [DataLoader(dataset, sampler(2, r)) for r in range(2)]
    for new in news:
        new.load_state_dict(states)
    after_batches = _run(news)
    assert len(after_batches[0]) == len(after_batches[1])
    after = sum((sum(b, []) for b in after_batches), [])
    assert set(before).isdisjoint(after) and set(before) | set(after) == set(range(n))
    with pytest.raises(ArgumentValueError, match="(batch_size|boundaries)="):  # it cuts the global batches
        DataLoader(dataset, sampler(2, 0, batch_size=8)).load_state_dict(states)


def test_infinite_resumes_the_pass_in_progress_then_whole_passes_of_the_new_world():
    dataset = ArrayDataset(np.arange(30))

    def loader(world, rank, batch):
        return DataLoader(dataset, Infinite(_sampler("random", dataset, world, rank, batch)))

    olds = [loader(3, r, 2) for r in range(3)]
    per_pass = len(_sampler("random", dataset, 3, 0, 2))  # 5 batches a pass
    before = _run(olds, per_pass + 2)  # into the second pass (epoch 1 of the sampler)
    pass_one_before = sum((sum(b[per_pass:], []) for b in before), [])
    states = [old.state_dict() for old in olds]
    news = [loader(2, r, 4) for r in range(2)]
    for new in news:
        new.load_state_dict(states)
    rest_len = len(_sampler("random", dataset, 2, 0, 4))  # what a whole pass would be
    its = [iter(new) for new in news]
    rest = [[_ids(next(it)) for _ in range(2)] for it in its]  # 30 - 12 = 18 left: 9 a rank, 3 batches
    rest = [r + [_ids(next(it))] for r, it in zip(rest, its)]
    pass_one_after = sum((sum(r, []) for r in rest), [])
    assert sorted(pass_one_before + pass_one_after) == list(range(30))
    nxt = [[_ids(next(it)) for _ in range(rest_len)] for it in its]  # the next pass: epoch 2 at the new world
    fresh = [_sampler("random", dataset, 2, r, 4) for r in range(2)]
    for r, sampler in enumerate(fresh):
        sampler.set_epoch(2)
        assert nxt[r] == list(sampler)


def test_epoch_size_carries_on_from_the_step_the_ranks_agree_on():
    dataset = ArrayDataset(np.arange(48))

    def loader(world, rank, batch):
        return DataLoader(dataset, _sampler("random", dataset, world, rank, batch), epoch_size=5)

    olds = [loader(4, r, 2) for r in range(4)]
    before = sum((sum(b, []) for b in _run(olds, 3)), [])
    states = [old.state_dict() for old in olds]
    news = [loader(2, r, 4) for r in range(2)]
    for new in news:
        new.load_state_dict(states)
    assert [len(new) for new in news] == [5, 5]
    its = [iter(new) for new in news]
    after = [[_ids(b) for b in it] for it in its]
    assert [len(a) for a in after] == [2, 2]  # the fixed epoch's 2 batches left
    # the pass: 48 ids, 24 handed out before; 16 now; the rest comes next epoch, then a new pass
    more = [[_ids(b) for b in iter(new)] for new in news]
    flat = before + sum((sum(a, []) for a in after), []) + sum((sum(m[:1], []) for m in more), [])
    assert sorted(flat) == list(range(48))


def test_lists_that_do_not_fit_are_refused_naming_why():
    dataset = ArrayDataset(np.arange(20))
    olds = [DataLoader(dataset, _sampler("random", dataset, 2, r, 2)) for r in range(2)]
    _run(olds, 1)
    states = [old.state_dict() for old in olds]
    new = DataLoader(dataset, _sampler("random", dataset, 3, 0, 2))
    with pytest.raises(ArgumentValueError, match="world of 2 ranks"):
        new.load_state_dict(states[:1] + states)
    with pytest.raises(ArgumentValueError, match="rank order"):
        new.load_state_dict(states[::-1])
    with pytest.raises(ArgumentValueError, match="empty list"):
        new.load_state_dict([])
    other = DataLoader(ArrayDataset(np.arange(21)), _sampler("random", ArrayDataset(np.arange(21)), 3, 0, 2))
    with pytest.raises(ArgumentValueError, match="length"):
        other.load_state_dict(states)


def test_a_sampler_that_cannot_say_which_indices_each_rank_took_is_refused():
    dataset = ArrayDataset(np.arange(20))

    class Mine:
        batch_size, drop_last = 2, False

        def __iter__(self):
            return iter([[0, 1], [2, 3]])

        def __len__(self):
            return 2

        def state_dict(self):
            return {"mine": True}

        def load_state_dict(self, state):
            pass

    olds = [DataLoader(dataset, _sampler("random", dataset, 2, r, 2)) for r in range(2)]
    _run(olds, 1)
    states = [old.state_dict() for old in olds]
    new = DataLoader(dataset, Mine())
    with pytest.raises(ArgumentValueError, match="world_size"):
        new.load_state_dict(states)


class _Flaky:
    """Ids whose sample raises: a bad-sample policy leaves them out."""

    def __init__(self, n, bad):
        self.n, self.bad = n, set(bad)

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        if index in self.bad:
            raise ValueError(f"sample {index} is bad")
        return np.int64(index)


@pytest.mark.parametrize("on_error", ["skip", "replace"])
def test_bad_samples_left_out_or_replaced_before_the_change_are_not_read_again(on_error):
    n, bad = 60, {3, 17, 40}
    dataset = _Flaky(n, bad)

    def loader(world, rank, batch):
        return DataLoader(dataset, _sampler("random", dataset, world, rank, batch), on_error=on_error, max_errors=10)

    seen = []
    olds = [loader(3, r, 4) for r in range(3)]
    for old in olds:
        with iter(old) as batches:
            seen += sum((next(batches).tolist() for _ in range(2)), [])
    states = [old.state_dict() for old in olds]
    for rank in range(2):
        new = loader(2, rank, 6)
        new.load_state_dict(states)
        seen += sum((batch.tolist() for batch in new), [])
    good = set(range(n)) - bad
    assert set(seen) - bad == good and not set(seen) & bad  # no bad sample, every good one
    if on_error == "skip":  # nothing in the place of the bad ones: each good one once, plus padding
        assert len(seen) - len(good) <= 1


def test_a_state_taken_at_the_end_of_a_reshaped_epoch_resumes_the_next_one():
    dataset = ArrayDataset(np.arange(14))
    olds = [DataLoader(dataset, _sampler("random", dataset, 3, r, 1)) for r in range(3)]
    _run(olds, 3)
    states = [old.state_dict() for old in olds]
    news = [DataLoader(dataset, _sampler("random", dataset, 5, r, 1)) for r in range(5)]
    for new in news:
        new.load_state_dict(states)
        assert len(new) == 1
        with iter(new) as batches:
            next(batches)  # the reshaped epoch's last batch, and the loop is left inside it
    ends = [new.state_dict() for new in news]
    assert ends[0]["epoch"] == 1 and ends[0]["source"]["sampler"]["epoch"] == 1
    again = DataLoader(dataset, _sampler("random", dataset, 5, 0, 1))
    again.load_state_dict(ends[0])
    plain = _sampler("random", dataset, 5, 0, 1)
    plain.set_epoch(1)
    assert [_ids(b) for b in again] == list(plain)
    later = [DataLoader(dataset, _sampler("random", dataset, 2, r, 3)) for r in range(2)]
    for loader in later:
        loader.load_state_dict(ends)  # a plain epoch 1 on the new world: whole
    assert sorted(sum((sum(b, []) for b in _run(later)), [])) == list(range(14))


def test_one_state_loaded_by_every_rank_of_its_own_world_leaves_states_that_reshape_again():
    dataset = ArrayDataset(np.arange(40))
    olds = [DataLoader(dataset, _sampler("random", dataset, 4, r, 2)) for r in range(4)]
    seen = sum((sum(b, []) for b in _run(olds, 2)), [])
    one = olds[0].state_dict()
    same = [DataLoader(dataset, _sampler("random", dataset, 4, r, 2)) for r in range(4)]
    for loader in same:
        loader.load_state_dict(one)
    seen += sum((sum(b, []) for b in _run(same, 1)), [])
    states = [loader.state_dict() for loader in same]
    assert len({json.dumps(s["source"], sort_keys=True).replace(f'"rank": {r}', "") for r, s in enumerate(states)}) == 1
    news = [DataLoader(dataset, _sampler("random", dataset, 2, r, 4)) for r in range(2)]
    for new in news:
        new.load_state_dict(states)
    seen += sum((sum(b, []) for b in _run(news)), [])
    assert sorted(seen) == list(range(40))


def test_epoch_size_states_taken_before_an_epochs_first_batch_reshape():
    dataset = ArrayDataset(np.arange(24))

    def loader(world, rank):
        return DataLoader(dataset, _sampler("random", dataset, world, rank, 2), epoch_size=5)

    olds = [loader(2, r) for r in range(2)]
    seen = sum((sum(b, []) for b in _run(olds)), [])  # epoch 0 whole: 10 of the pass's 12 batches
    opened = [iter(old) for old in olds]  # epoch 1 opened, no batch taken
    states = [old.state_dict() for old in olds]
    assert all(state["source"] for state in states)
    news = [loader(3, r) for r in range(3)]
    for new in news:
        new.load_state_dict(states)
    rest = _run(news)  # epoch 1: the pass's 4 ids left, padded to 2 for each of 3 ranks, then pass 1
    pass_rest = sum((batches[0] for batches in rest), [])
    assert len(pass_rest) == 6 and len(set(pass_rest)) == 4 and set(seen).isdisjoint(pass_rest)
    assert sorted(set(seen) | set(pass_rest)) == list(range(24))
    for rank, batches in enumerate(rest):
        plain = _sampler("random", dataset, 3, rank, 2)
        plain.set_epoch(1)
        assert batches[1:] == list(plain)[:4]  # the next pass: the new world's epoch 1
    del opened
