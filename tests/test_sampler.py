"""Tests for dataloader.sampler: MegEngine's batch samplers, their fixed bugs, and sharding."""

from __future__ import annotations

import copy
import itertools
import pickle
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataloader.errors import ArgumentTypeError, ArgumentValueError
from dataloader._world import MAX_WORLD_SIZE
from dataloader.sampler import (
    Infinite,
    MapSampler,
    RandomSampler,
    ReplacementSampler,
    Sampler,
    SequentialSampler,
    StreamSampler,
)
from dataloader.sampler._reading import yields_valid_indices

FAST = settings(max_examples=60, deadline=None)


@pytest.fixture(autouse=True)
def _no_launcher_env(monkeypatch):
    """Tests run as if not launched by torchrun, unless a test sets the variables itself."""
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.delenv("RANK", raising=False)


def flat(batches):
    return [i for b in batches for i in b]


def all_ranks(make, world_size):
    """One epoch of batches for each rank; ``make(world_size, rank)`` builds the sampler."""
    samplers = [make(world_size, r) for r in range(world_size)]
    return samplers, [list(s) for s in samplers]


# ---------------------------------------------------------------- basics


def test_sequential_batches_in_order():
    s = SequentialSampler(range(10), batch_size=3)
    assert list(s) == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    assert len(s) == 4


def test_sequential_drop_last():
    s = SequentialSampler(range(10), batch_size=3, drop_last=True)
    assert list(s) == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    assert len(s) == 3


@pytest.mark.parametrize("cls", [SequentialSampler, RandomSampler, ReplacementSampler])
def test_batches_hold_python_ints(cls):
    batch = next(iter(cls(np.arange(7), batch_size=4)))
    assert all(type(i) is int for i in batch)


def test_batch_is_iter():
    s, t = SequentialSampler(range(5), 2), SequentialSampler(range(5), 2)
    assert list(s.batch()) == list(iter(t)) == [[0, 1], [2, 3], [4]]


def test_sampler_is_abstract():
    with pytest.raises(TypeError):
        Sampler()


def test_map_sampler_sample_is_an_override_point():
    with pytest.raises(NotImplementedError, match="sample"):
        list(MapSampler(range(4)))

    class Reversed(MapSampler):
        def sample(self):
            return list(range(self.num_samples))[::-1]

    assert list(Reversed(range(5), batch_size=2)) == [[4, 3], [2, 1], [0]]


def test_scatter_override_point():
    class EvenRanksOnly(SequentialSampler):
        def scatter(self, indices):
            return indices[indices % 2 == 0]

    assert list(EvenRanksOnly(range(6), batch_size=2)) == [[0, 2], [4]]


def test_large_epoch_crosses_tolist_chunks():
    n, bs = 200_003, 7
    batches = list(SequentialSampler(range(n), batch_size=bs))
    assert flat(batches) == list(range(n))
    assert all(len(b) == bs for b in batches[:-1]) and len(batches[-1]) == n % bs
    big = list(SequentialSampler(range(150_000), batch_size=70_000))
    assert [len(b) for b in big] == [70_000, 70_000, 10_000]


# ---------------------------------------------------------------- MegEngine bug fixes


def test_len_respects_indices():
    s = SequentialSampler(range(100), batch_size=4, indices=[5, 3, 9])
    assert len(s) == 1
    assert list(s) == [[5, 3, 9]]
    r = RandomSampler(range(100), batch_size=2, indices=np.array([5, 3, 9]), seed=0)
    assert len(r) == 2 and sorted(flat(r)) == [3, 5, 9]


@pytest.mark.parametrize("cls", [SequentialSampler, RandomSampler, ReplacementSampler])
def test_dataset_smaller_than_batch(cls):
    short = cls(range(3), batch_size=8)
    assert len(short) == 1 and [len(b) for b in short] == [3]
    dropped = cls(range(3), batch_size=8, drop_last=True)
    assert len(dropped) == 0 and list(dropped) == []


@pytest.mark.parametrize("indices", [np.array([2, 0]), (2, 0), range(2, -1, -2), [np.int32(2), 0]])
def test_indices_accept_any_int_sequence(indices):
    assert list(SequentialSampler(range(3), batch_size=5, indices=indices)) == [[2, 0]]


def test_replacement_draws_indices_not_counts():
    # rng.multinomial(5, [0, 0, 1]) is [0, 0, 5]: counts, which MegEngine used as indices.
    s = ReplacementSampler(range(3), batch_size=5, num_samples=5, weights=[0, 0, 1], seed=1)
    assert list(s) == [[2, 2, 2, 2, 2]]


def test_replacement_weights_unnormalised_and_numpy():
    s = ReplacementSampler(range(4), num_samples=400, weights=np.array([0.0, 30.0, 0.0, 10.0]))
    drawn = np.array(flat(s))
    assert set(drawn.tolist()) == {1, 3}
    assert 0.6 < np.mean(drawn == 1) < 0.9  # expected 0.75; the bounds are > 5 sigma apart


def test_replacement_uniform_covers_range():
    s = ReplacementSampler(range(5), batch_size=7, num_samples=500, seed=2)
    drawn = flat(s)
    assert len(s) == 72 and len(drawn) == 500 and set(drawn) == set(range(5))


def test_replacement_num_samples_is_total_before_sharding():
    shards = [ReplacementSampler(range(10), num_samples=10, world_size=3, rank=r) for r in range(3)]
    assert [len(flat(s)) for s in shards] == [4, 4, 4]
    assert [len(s) for s in shards] == [4, 4, 4]


# ---------------------------------------------------------------- argument errors


@pytest.mark.parametrize(
    "kwargs, exc, name",
    [
        ({"batch_size": 0}, ArgumentValueError, "batch_size"),
        ({"batch_size": "2"}, ArgumentTypeError, "batch_size"),
        ({"batch_size": 2.0}, ArgumentTypeError, "batch_size"),
        ({"drop_last": 1}, ArgumentTypeError, "drop_last"),
        ({"seed": -1}, ArgumentValueError, "seed"),
        ({"seed": 1.5}, ArgumentTypeError, "seed"),
        ({"world_size": 0}, ArgumentValueError, "world_size"),
        ({"world_size": 2, "rank": -1}, ArgumentValueError, "rank"),
        ({"world_size": 2, "rank": "0"}, ArgumentTypeError, "rank"),
        ({"indices": []}, ArgumentValueError, "indices"),
        ({"indices": np.array([], dtype=np.int64)}, ArgumentValueError, "indices"),
        ({"indices": [0.5, 1.0]}, ArgumentTypeError, "indices"),
        ({"indices": [[0, 1]]}, ArgumentTypeError, "indices"),
        ({"indices": [True, False]}, ArgumentTypeError, "indices"),
        ({"indices": [0, 10]}, ArgumentValueError, "indices"),
        ({"indices": [-1]}, ArgumentValueError, "indices"),
    ],
)
def test_random_sampler_argument_errors(kwargs, exc, name):
    with pytest.raises(exc, match=f"`{name}`") as info:
        RandomSampler(range(10), **kwargs)
    bad = kwargs.get(name, kwargs.get("indices"))
    if not isinstance(bad, (list, np.ndarray)):
        assert repr(bad) in str(info.value)


@pytest.mark.parametrize(
    "kwargs, exc",
    [
        ({"num_samples": 0}, ArgumentValueError),
        ({"num_samples": 1.0}, ArgumentTypeError),
        ({"weights": [1, 2]}, ArgumentValueError),
        ({"weights": [[1, 1, 1]]}, ArgumentValueError),
        ({"weights": [1, float("nan"), 1]}, ArgumentValueError),
        ({"weights": [1, float("inf"), 1]}, ArgumentValueError),
        ({"weights": [1, -1, 1]}, ArgumentValueError),
        ({"weights": [0, 0, 0]}, ArgumentValueError),
        ({"weights": [1e308, 1e308, 1e308]}, ArgumentValueError),
        ({"weights": ["a", "b", "c"]}, ArgumentTypeError),
    ],
)
def test_replacement_sampler_argument_errors(kwargs, exc):
    (name,) = kwargs
    with pytest.raises(exc, match=f"`{name}`"):
        ReplacementSampler(range(3), **kwargs)


@pytest.mark.parametrize(
    "dataset, exc", [(iter(range(3)), ArgumentTypeError), ([], ArgumentValueError)]
)
@pytest.mark.parametrize("cls", [SequentialSampler, RandomSampler, ReplacementSampler])
def test_dataset_must_have_nonzero_length(cls, dataset, exc):
    with pytest.raises(exc, match="`dataset`"):
        cls(dataset)


def test_rank_outside_world_names_both():
    with pytest.raises(ArgumentValueError, match="`rank`") as info:
        SequentialSampler(range(10), world_size=2, rank=2)
    assert "`world_size`" in str(info.value) and "got 2" in str(info.value)


def test_rank_without_world_size():
    with pytest.raises(ArgumentValueError, match="`rank`.*`world_size`"):
        SequentialSampler(range(10), rank=1)


def test_set_epoch_validates():
    s = RandomSampler(range(10), seed=0)
    with pytest.raises(ArgumentValueError, match="`epoch`.*-1"):
        s.set_epoch(-1)
    with pytest.raises(ArgumentTypeError, match="`epoch`"):
        s.set_epoch(1.0)


# ---------------------------------------------------------------- distributed and environment


def test_wraparound_padding_exact():
    ranks = [list(SequentialSampler(range(5), world_size=2, rank=r)) for r in range(2)]
    assert ranks == [[[0], [2], [4]], [[1], [3], [0]]]  # padded to [0, 1, 2, 3, 4, 0]


def test_world_larger_than_dataset_wraps_several_times():
    ranks = [flat(SequentialSampler(range(2), world_size=5, rank=r)) for r in range(5)]
    assert ranks == [[0], [1], [0], [1], [0]]


def test_env_vars_set_world(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "2")
    s = RandomSampler(range(20), batch_size=3)
    assert (s.world_size, s.rank, s.seed) == (4, 2, 0)
    assert list(s) == list(RandomSampler(range(20), batch_size=3, world_size=4, rank=2, seed=0))


def test_arguments_override_env(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "3")
    s = SequentialSampler(range(8), world_size=2, rank=1)
    assert (s.world_size, s.rank) == (2, 1)


def test_env_unset_means_single_process():
    s = SequentialSampler(range(8))
    assert (s.world_size, s.rank) == (1, 0)


def test_world_size_argument_reads_rank_from_env(monkeypatch):
    monkeypatch.setenv("RANK", "1")
    assert SequentialSampler(range(8), world_size=2).rank == 1


@pytest.mark.parametrize(
    "env, pattern",
    [
        ({"WORLD_SIZE": "four"}, "`WORLD_SIZE`.*'four'"),
        ({"WORLD_SIZE": "0"}, "`WORLD_SIZE`"),
        ({"WORLD_SIZE": "2", "RANK": "2"}, "`RANK`.*`WORLD_SIZE`"),
        ({"RANK": "1"}, "`RANK`.*WORLD_SIZE is not set"),
        ({"WORLD_SIZE": "4"}, "`WORLD_SIZE` is 4 but no rank is given.*RANK"),
        ({"WORLD_SIZE": "99999999999999999999"}, "more processes than a job runs"),
    ],
)
def test_bad_env_vars(monkeypatch, env, pattern):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(ArgumentValueError, match=pattern):
        RandomSampler(range(8))


def test_a_world_without_a_rank_is_refused_not_read_as_rank_0():
    with pytest.raises(ArgumentValueError, match="`world_size` is 4 but no rank is given"):
        SequentialSampler(range(8), world_size=4)
    assert SequentialSampler(range(8), world_size=1).rank == 0  # one process: rank 0 is the only one


def test_a_rank_costs_its_own_share_whatever_the_world_size():
    world = MAX_WORLD_SIZE  # a plan over every rank would take seconds and gigabytes here
    last = SequentialSampler(range(3), world_size=world, rank=world - 1)
    assert flat(last) == [(world - 1) % 3]


def test_seed_none_single_process_draws_a_seed():
    a, b = RandomSampler(range(50), seed=None), RandomSampler(range(50), seed=None)
    assert isinstance(a.seed, int) and a.seed != b.seed  # 64-bit seeds: equal with p = 2**-64
    a2 = RandomSampler(range(50), seed=a.seed)
    assert list(a) == list(a2)


def test_seed_none_distributed_ranks_agree():
    samplers, ranks = all_ranks(lambda w, r: RandomSampler(range(12), world_size=w, rank=r), 3)
    assert all(s.seed == 0 for s in samplers)
    assert sorted(flat(flat(ranks))) == list(range(12))


# ---------------------------------------------------------------- epochs


def test_each_iteration_is_a_new_epoch():
    s = RandomSampler(range(100), batch_size=10, seed=3)
    first, second = list(s), list(s)
    assert s.epoch == 2 and first != second  # equal with p = 1/100!
    s.set_epoch(0)
    assert list(s) == first and s.epoch == 1


def test_sample_is_pure():
    s = RandomSampler(range(30), seed=4)
    assert np.array_equal(s.sample(), s.sample()) and s.epoch == 0


def test_epoch_advances_when_iteration_starts():
    s = RandomSampler(range(30), batch_size=4, seed=5)
    it = iter(s)
    assert s.epoch == 1
    s.set_epoch(0)
    assert list(s) == list(it)


# ---------------------------------------------------------------- Infinite


def test_infinite_restarts():
    inf = Infinite(SequentialSampler(range(5), batch_size=2))
    assert iter(inf) is inf
    got = list(itertools.islice(inf, 7))
    assert got == [[0, 1], [2, 3], [4], [0, 1], [2, 3], [4], [0, 1]]
    assert len(inf) == sys.maxsize


def test_infinite_new_epoch_each_pass():
    inf = Infinite(RandomSampler(range(40), batch_size=40, seed=0))
    first, second = next(inf), next(inf)
    assert sorted(first) == sorted(second) == list(range(40)) and first != second


def test_infinite_reaches_wrapped_attributes():
    inner = RandomSampler(range(10), batch_size=3, drop_last=True, seed=9)
    inf = Infinite(inner)
    assert (inf.batch_size, inf.drop_last, inf.seed, inf.sampler) == (3, True, 9, inner)
    inf.set_epoch(4)
    assert inner.epoch == 4
    with pytest.raises(AttributeError, match="no_such"):
        inf.no_such


def test_infinite_does_not_delegate_dunders():
    class CopiesAsItself(SequentialSampler):
        def __deepcopy__(self, memo):
            return self

    inf = Infinite(CopiesAsItself(range(4), batch_size=2))
    assert isinstance(copy.deepcopy(inf), Infinite)
    with pytest.raises(AttributeError):
        inf.__deepcopy__


@pytest.mark.parametrize("taken", [0, 3, 6, 9])
def test_infinite_pickles_mid_iteration_and_resumes(taken):
    inf = Infinite(RandomSampler(range(23), batch_size=4, seed=7))  # 6 batches per pass
    for _ in range(taken):
        next(inf)
    copy = pickle.loads(pickle.dumps(inf))
    assert copy.batch_size == 4
    assert [next(copy) for _ in range(10)] == [next(inf) for _ in range(10)]


def test_infinite_of_stream_sampler():
    inf = pickle.loads(pickle.dumps(Infinite(StreamSampler(batch_size=2))))
    assert list(itertools.islice(inf, 3)) == [[0, 1]] * 3 and inf.batch_size == 2


def test_infinite_rejects_empty_and_non_samplers():
    with pytest.raises(ArgumentValueError, match="`sampler`"):
        Infinite(SequentialSampler(range(3), batch_size=8, drop_last=True))
    with pytest.raises(ArgumentTypeError, match="`sampler`.*int"):
        Infinite(42)


# ---------------------------------------------------------------- StreamSampler


def test_stream_sampler_yields_range_forever():
    s = StreamSampler(batch_size=3)
    batches = list(itertools.islice(s, 4))
    assert batches == [[0, 1, 2]] * 4
    batches[0].append(99)
    assert next(iter(s)) == [0, 1, 2]


def test_stream_sampler_has_no_len():
    with pytest.raises(TypeError, match="StreamSampler has no length"):
        len(StreamSampler(4))


def test_stream_sampler_validates_batch_size():
    with pytest.raises(ArgumentValueError, match="`batch_size`.*0"):
        StreamSampler(0)


# ---------------------------------------------------------------- properties

sizes = st.integers(1, 200)
batch_sizes = st.integers(1, 17)
worlds = st.integers(1, 8)
seeds = st.integers(0, 2**64 - 1)


@FAST
@given(n=sizes, bs=batch_sizes, seed=seeds, data=st.data())
def test_random_epoch_is_a_permutation(n, bs, seed, data):
    indices = data.draw(st.none() | st.lists(st.integers(0, n - 1), min_size=1, max_size=50))
    s = RandomSampler(range(n), batch_size=bs, indices=indices, seed=seed)
    expected = sorted(range(n) if indices is None else indices)
    for _ in range(2):
        batches = list(s)
        assert sorted(flat(batches)) == expected and len(batches) == len(s)


@settings(max_examples=150, deadline=None)
@given(
    n=sizes, bs=batch_sizes, world=worlds, drop_last=st.booleans(), seed=seeds,
    cls=st.sampled_from([SequentialSampler, RandomSampler]),
)
def test_shards_are_even_disjoint_and_covering(n, bs, world, drop_last, seed, cls):
    kw = {} if cls is SequentialSampler else {"seed": seed}
    samplers, ranks = all_ranks(
        lambda w, r: cls(range(n), batch_size=bs, drop_last=drop_last, world_size=w, rank=r, **kw),
        world,
    )
    per_rank = -(-n // world)
    assert {len(s) for s in samplers} == {len(b) for b in ranks} == {len(samplers[0])}
    assert all(len(b) == bs for batches in ranks for b in batches[: len(batches) - 1])
    everything = flat(flat(ranks))
    if not drop_last:
        assert len(everything) == per_rank * world and set(everything) == set(range(n))
    if n % world == 0:
        assert len(set(everything)) == len(everything)
        if not drop_last:
            assert sorted(everything) == list(range(n))


@FAST
@given(n=st.integers(10, 200), bs=batch_sizes, world=worlds, seed=seeds, data=st.data())
def test_set_epoch_is_deterministic(n, bs, world, seed, data):
    rank = data.draw(st.integers(0, world - 1))
    epoch = data.draw(st.integers(0, 1000))

    def make():
        return RandomSampler(range(n), batch_size=bs, world_size=world, rank=rank, seed=seed)

    a, b = make(), make()
    a.set_epoch(epoch), b.set_epoch(epoch)
    assert list(a) == list(b)
    orders = []
    for e in range(10):
        a.set_epoch(e)
        orders.append(a.sample().tolist())
    assert any(o != orders[0] for o in orders[1:])  # 9 equal permutations of >= 10: p < 1e-58


@FAST
@given(n=sizes, bs=batch_sizes, seed=seeds, world=worlds)
def test_same_seed_same_sequence_of_epochs(n, bs, seed, world):
    def epochs(cls):
        s = cls(range(n), batch_size=bs, world_size=world, rank=world - 1, seed=seed)
        return [list(s) for _ in range(3)]

    assert epochs(RandomSampler) == epochs(RandomSampler)
    assert epochs(ReplacementSampler) == epochs(ReplacementSampler)


weight_lists = st.lists(st.sampled_from([0.0, 0.0, 0.5, 1.0, 7.0]), min_size=1, max_size=60)


@FAST
@given(
    weights=weight_lists.filter(any),
    bs=batch_sizes, world=worlds, drop_last=st.booleans(), seed=seeds, data=st.data(),
)
def test_replacement_only_draws_positive_weights(weights, bs, world, drop_last, seed, data):
    num = data.draw(st.integers(1, 300))
    samplers, ranks = all_ranks(
        lambda w, r: ReplacementSampler(
            range(len(weights)), bs, drop_last, num, weights, world_size=w, rank=r, seed=seed
        ),
        world,
    )
    assert all(weights[i] > 0 for i in flat(flat(ranks)))
    assert [len(b) for b in ranks] == [len(s) for s in samplers] == [len(samplers[0])] * world


# -- which samplers the loader trusts with its indices ------------------------------------


def test_our_samplers_are_trusted_to_give_fresh_non_negative_index_lists():
    data = list(range(10))
    for sampler in (SequentialSampler(data, batch_size=3), RandomSampler(data, batch_size=3, seed=1),
                    ReplacementSampler(data, batch_size=3, seed=1), Infinite(RandomSampler(data, batch_size=3))):
        assert yields_valid_indices(sampler)
        batch = next(iter(sampler))
        assert type(batch) is list and all(type(i) is int and i >= 0 for i in batch)


def test_subclasses_and_samplers_of_your_own_are_checked():
    class Shifted(RandomSampler):
        def sample(self):
            return super().sample() - 1  # may reach back to -1

    data = list(range(10))
    assert not yields_valid_indices(Shifted(data, batch_size=3))
    assert not yields_valid_indices(Infinite(Shifted(data, batch_size=3)))
    assert not yields_valid_indices([[0, 1], [-1, 2]])
