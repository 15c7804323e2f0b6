"""BucketSampler: every index once per epoch across ranks, budgets held, batches as full as the
cuts allow, the same number per rank and per epoch, the same batches through the loader for
any worker count and type, and an exact mid-epoch resume through the loader's state."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataloader import (
    ArgumentTypeError,
    ArgumentValueError,
    ArrayDataset,
    BucketSampler,
    DataLoader,
    Infinite,
)
from dataloader.sampler._reading import batches_from, yields_valid_indices

MODES = ["batch_size", "max_tokens", "both"]


def _sampler(lengths, mode: str, size: int, budget: int, **options) -> BucketSampler:
    limits = {
        "batch_size": {"batch_size": size},
        "max_tokens": {"max_tokens": budget},
        "both": {"batch_size": size, "max_tokens": budget},
    }[mode]
    return BucketSampler(range(len(lengths)), lengths, **limits, **options)


def _capacity(sampler: BucketSampler, length: int) -> int:
    """What a batch whose longest sample is in ``length``'s bucket may hold."""
    bucket = np.searchsorted(sampler.boundaries, sampler.lengths, side="left")
    mine = int(np.searchsorted(sampler.boundaries, length, side="left"))
    longest = max(int(sampler.lengths[bucket == mine].max()), 1)
    caps = [c for c in (sampler.batch_size, None if sampler.max_tokens is None else sampler.max_tokens // longest) if c]
    return min(caps)


def _check_budget(sampler: BucketSampler, batch: list[int]) -> None:
    longest = int(sampler.lengths[batch].max())
    if sampler.max_tokens is not None:
        assert len(batch) * max(longest, 1) <= sampler.max_tokens
    if sampler.batch_size is not None:
        assert len(batch) <= sampler.batch_size


@st.composite
def configs(draw):
    lengths = draw(st.lists(st.integers(0, 60), min_size=1, max_size=90))
    budget = draw(st.integers(max(max(lengths), 1), 400))
    boundaries = draw(st.one_of(st.none(), st.lists(st.integers(1, 70), min_size=1, max_size=6, unique=True).map(sorted)))
    return {
        "lengths": lengths,
        "mode": draw(st.sampled_from(MODES)),
        "size": draw(st.integers(1, 12)),
        "budget": budget,
        "boundaries": boundaries,
        "world": draw(st.integers(1, 4)),
        "drop_last": draw(st.booleans()),
        "shuffle": draw(st.booleans()),
        "seed": draw(st.integers(0, 3)),
        "epoch": draw(st.integers(0, 3)),
    }


def _ranks(config: dict) -> list[BucketSampler]:
    return [
        _sampler(
            config["lengths"], config["mode"], config["size"], config["budget"], boundaries=config["boundaries"],
            world_size=config["world"], rank=rank, drop_last=config["drop_last"], shuffle=config["shuffle"],
            seed=config["seed"],
        )
        for rank in range(config["world"])
    ]


@settings(max_examples=150, deadline=None)
@given(config=configs())
def test_every_index_once_budgets_held_equal_counts_across_ranks(config):
    samplers = _ranks(config)
    per_rank = []
    for sampler in samplers:
        sampler.set_epoch(config["epoch"])
        expected = len(sampler)
        batches = list(sampler)
        assert len(batches) == expected == len(sampler)  # len() is the same for every epoch
        for batch in batches:
            assert batch and all(type(i) is int for i in batch)
            _check_budget(sampler, batch)
        per_rank.append(batches)
    assert len({len(batches) for batches in per_rank}) == 1  # DDP needs equal counts
    seen = Counter(i for batches in per_rank for batch in batches for i in batch)
    n, world = len(config["lengths"]), config["world"]
    order, starts, stops = samplers[0].global_batches(config["epoch"])
    if config["drop_last"]:
        assert max(seen.values(), default=1) == 1
        # Only the global list's remainder (and a short last batch) is missing.
        kept = (len(starts) // world) * world
        assert sum(seen.values()) == int((stops - starts)[:kept].sum())
    else:
        assert set(seen) == set(range(n))
        if config["mode"] != "batch_size" and n >= len(per_rank[0]) * world:
            assert max(seen.values()) == 1  # halving batches, not repeating them
        elif config["mode"] == "batch_size":  # the fewest repeats: from the shuffled list's start
            slots = len(per_rank[0]) * world
            assert 0 <= slots - len(starts) < world
            assert sum(seen.values()) == int((stops - starts)[np.arange(slots) % len(starts)].sum())


@settings(max_examples=100, deadline=None)
@given(config=configs())
def test_each_batch_is_as_full_as_its_bucket_allows(config):
    sampler = _sampler(
        config["lengths"], config["mode"], config["size"], config["budget"], boundaries=config["boundaries"],
        shuffle=False,
    )
    batches = list(sampler)
    lengths = sampler.lengths
    flat = [i for batch in batches for i in batch]
    assert flat == sorted(range(len(lengths)), key=lambda i: (int(np.searchsorted(sampler.boundaries, lengths[i])), i))
    for batch, after in zip(batches, batches[1:]):
        # Short only where the next sample's bucket could not take one more into this batch.
        full = len(batch) == _capacity(sampler, int(lengths[batch[-1]]))
        assert full or len(batch) >= _capacity(sampler, int(lengths[after[0]]))
    if config["mode"] == "batch_size":
        assert all(len(batch) == config["size"] for batch in batches[:-1])


def test_four_ranks_equal_counts_every_index_covered_budget_held():
    rng = np.random.default_rng(4)
    lengths = np.clip(rng.lognormal(np.log(60), 0.8, 1000), 1, 900).astype(np.int64)
    remainders = set()
    for size in (990, 997):
        for drop_last in (False, True):
            samplers = [
                BucketSampler(range(size), lengths[:size], max_tokens=1000, world_size=4, rank=rank, seed=3,
                              drop_last=drop_last)
                for rank in range(4)
            ]
            ranks = [list(sampler) for sampler in samplers]
            assert len({len(batches) for batches in ranks}) == 1
            seen = Counter(i for batches in ranks for batch in batches for i in batch)
            assert max(seen.values()) == 1
            assert all(len(b) * int(lengths[b].max()) <= 1000 for batches in ranks for b in batches)
            _, starts, stops = samplers[0].global_batches(0)
            remainders.add(len(starts) % 4)
            if drop_last:  # left out: the global list's remainder past a multiple of 4 batches
                assert len(seen) == int((stops - starts)[: len(starts) // 4 * 4].sum())
            else:  # every index, none repeated: the largest batches were halved
                assert len(seen) == size and len(ranks[0]) == -(-len(starts) // 4)
    assert remainders - {0}  # some sizes needed halving


def test_same_seed_and_epoch_give_the_same_batches_other_epochs_another_order():
    lengths = np.random.default_rng(0).integers(1, 200, 500)
    first = BucketSampler(range(500), lengths, max_tokens=800, seed=7)
    again = BucketSampler(range(500), lengths, max_tokens=800, seed=7)
    epochs = [list(first) for _ in range(3)]
    assert [list(again) for _ in range(3)] == epochs
    assert epochs[0] != epochs[1] != epochs[2]
    assert len({len(batches) for batches in epochs}) == 1
    again.set_epoch(1)
    assert list(again) == epochs[1]
    other = BucketSampler(range(500), lengths, max_tokens=800, seed=8)
    assert list(other) != epochs[0]


def test_default_buckets_keep_padding_small():
    rng = np.random.default_rng(1)
    lengths = np.clip(np.round(rng.lognormal(np.log(300) - 0.5, 1.0, 20_000)), 1, 8192).astype(np.int64)
    sampler = BucketSampler(range(len(lengths)), lengths, max_tokens=16384, seed=0)
    padded = real = 0
    for batch in sampler:
        real += int(lengths[batch].sum())
        padded += len(batch) * int(lengths[batch].max())
    assert 1 - real / padded < 0.08  # unbucketed random batches pad about 70%


def _loader(sampler: BucketSampler, workers: int = 0, **options) -> DataLoader:
    dataset = ArrayDataset(np.arange(len(sampler.lengths)))
    return DataLoader(dataset, sampler, num_workers=workers, **options)


def _ids(batch) -> list[int]:
    """The dataset indices of a loader's batch (ArrayDataset yields 1-tuples)."""
    (ids,) = batch
    return ids.tolist()


def _bucketed(**options) -> BucketSampler:
    lengths = np.random.default_rng(2).integers(1, 40, 120)
    return BucketSampler(range(120), lengths, max_tokens=90, seed=5, **options)


@pytest.mark.parametrize("workers, kind", [(2, "process"), (2, "thread")])
def test_the_loader_gives_the_samplers_batches_for_any_workers(no_leaks, workers, kind):
    sampler = _bucketed()
    expected = [list(sampler) for _ in range(2)]
    serial = _loader(_bucketed())
    assert [[_ids(b) for b in serial] for _ in range(2)] == expected
    loader = _loader(_bucketed(), workers, worker_type=kind)
    assert len(loader) == len(expected[0])
    assert [[_ids(b) for b in loader] for _ in range(2)] == expected


@pytest.mark.parametrize("workers", [0, 2])
def test_a_state_mid_epoch_resumes_exactly_the_rest(no_leaks, workers):
    whole = list(_bucketed(world_size=2, rank=1))
    loader = _loader(_bucketed(world_size=2, rank=1), workers)
    head = []
    for count, batch in enumerate(loader, 1):
        head.append(_ids(batch))
        if count == 3:
            state = json.loads(json.dumps(loader.state_dict()))
            break
    resumed = _loader(_bucketed(world_size=2, rank=1), workers)
    resumed.load_state_dict(state)
    assert head + [_ids(b) for b in resumed] == whole


def test_a_state_of_other_lengths_or_options_is_refused_naming_the_field():
    lengths = list(range(1, 41))
    sampler = BucketSampler(range(40), lengths, max_tokens=80, seed=1)
    state = json.loads(json.dumps(sampler.state_dict()))
    other = list(lengths)
    other[3] += 1
    for changed, field in [
        (BucketSampler(range(40), other, max_tokens=80, seed=1), "lengths"),
        (BucketSampler(range(40), lengths, max_tokens=81, seed=1), "max_tokens"),
        (BucketSampler(range(40), lengths, max_tokens=80, seed=1, shuffle=False), "shuffle"),
        (BucketSampler(range(40), lengths, max_tokens=80, seed=1, boundaries=[10, 20]), "boundaries"),
    ]:
        with pytest.raises(ArgumentValueError, match=rf"with {field}="):
            changed.load_state_dict(state)
    same = BucketSampler(range(40), lengths, max_tokens=80, seed=1)
    same.load_state_dict(state)
    assert list(same) == list(sampler)


def test_the_loader_trusts_this_class_not_a_subclass_and_skips_without_making_batches():
    sampler = _bucketed()
    assert yields_valid_indices(sampler) and yields_valid_indices(Infinite(sampler))

    class Mine(BucketSampler):
        pass

    assert not yields_valid_indices(Mine(range(3), [1, 2, 3], batch_size=2))
    whole = list(_bucketed())
    assert list(batches_from(_bucketed(), 3)) == whole[3:]
    assert [a.tolist() for a in batches_from(_bucketed(), 2, arrays=True)] == whole[2:]
    endless = Infinite(_bucketed())
    assert [next(endless) for _ in range(len(whole) + 2)] == whole + _second_epoch()[:2]


def _second_epoch() -> list:
    sampler = _bucketed()
    sampler.set_epoch(1)
    return list(sampler)


def test_lengths_from_arrow_columns():
    tokens = pa.array([[1, 2, 3], [4], [], [5, 6]])
    by_lists = BucketSampler(range(4), tokens, batch_size=2, shuffle=False)
    assert by_lists.lengths.tolist() == [3, 1, 0, 2]
    chunked = pa.chunked_array([[3, 1], [0, 2]])
    assert BucketSampler(range(4), chunked, batch_size=2, shuffle=False).lengths.tolist() == [3, 1, 0, 2]
    assert list(by_lists) == [[1, 2], [0, 3]]  # buckets: lengths <= 1, the rest


@pytest.mark.parametrize("args, options, error, words", [
    (([1, 2],), {}, ArgumentValueError, "neither"),
    (([1, 2, 3],), {"batch_size": 2}, ArgumentValueError, "the dataset has 2 and `lengths` has 3"),
    (([1, -2],), {"batch_size": 2}, ArgumentValueError, "index 1 has length -2"),
    (([1.5, 2.0],), {"batch_size": 2}, ArgumentTypeError, "integers"),
    (([5, 90],), {"max_tokens": 64}, ArgumentValueError, r"1 sample\(s\) are longer than max_tokens=64: the first is index 1, of length 90\. Raise max_tokens to at least 90"),
    (([5, 9],), {"batch_size": 2, "boundaries": [4, 4]}, ArgumentValueError, "strictly increasing"),
    (([5, 9],), {"batch_size": 0}, ArgumentValueError, "batch_size"),
    (([5, 9],), {"max_tokens": 0}, ArgumentValueError, "max_tokens"),
    ((pa.array([1, None]),), {"batch_size": 2}, ArgumentValueError, "the first at index 1"),
])
def test_errors_name_the_cause(args, options, error, words):
    with pytest.raises(error, match=words):
        BucketSampler(range(2), *args, **options)


def test_a_resumed_map_sampler_that_overrides_batch_is_asked_for_its_rest_only():
    from dataloader import MapSampler

    class Counting(MapSampler):
        starts: list[int] = []

        def sample(self):
            return np.arange(self.num_samples)

        def batch(self, start: int = 0):
            self.starts.append(start)
            return super().batch(start)

    sampler = Counting(range(10), batch_size=3, seed=0)
    assert list(batches_from(sampler, 2)) == [[6, 7, 8], [9]]
    assert Counting.starts == [2]


def test_a_map_sampler_whose_batch_override_takes_no_start_still_works_and_resumes(no_leaks):
    # Written before batch() took `start`: the loader must iterate it as before (it crashed
    # with a TypeError on every epoch), and a resume skips its batches by iterating.
    from dataloader import MapSampler

    class Reversed(MapSampler):
        def sample(self):
            return np.arange(self.num_samples)

        def batch(self):
            return (b[::-1] for b in super().batch())

    dataset = ArrayDataset(np.arange(10))
    assert [_ids(b) for b in DataLoader(dataset, Reversed(range(10), batch_size=3, seed=0))] == [
        [2, 1, 0], [5, 4, 3], [8, 7, 6], [9]
    ]
    loader = DataLoader(dataset, Reversed(range(10), batch_size=3, seed=0))
    it = iter(loader)
    next(it)
    state = json.loads(json.dumps(loader.state_dict()))
    resumed = DataLoader(dataset, Reversed(range(10), batch_size=3, seed=0))
    resumed.load_state_dict(state)
    assert [_ids(b) for b in resumed] == [[5, 4, 3], [8, 7, 6], [9]]


def test_lengths_past_int64_are_refused_not_wrapped():
    lengths = np.array([3, 2**63, 5], dtype=np.uint64)
    with pytest.raises(ArgumentValueError, match="index 1 has length 9223372036854775808"):
        BucketSampler(list(range(3)), lengths, batch_size=2)
