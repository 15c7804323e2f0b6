"""MixedStream: every row once per (source) epoch over ranks x workers, the weights, the stop
rules, determinism, exact resume (directly and through a DataLoader), and its errors."""

from __future__ import annotations

import json
import pickle
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

from dataloader import ArrayDataset, DataLoader, MixedStream, ParquetStream, StreamDataset, StreamSampler
from dataloader import write_parquet_shards
from dataloader.errors import ArgumentTypeError, ArgumentValueError
from dataloader.mixing import MixSourceStats, MixStats
from tests.harness import as_worker




def shards(directory: Path, first: int, rows: int, per_shard: int, group: int) -> Path:
    """Parquet shards of ids ``first .. first + rows - 1`` (the last shard shorter, uneven row groups)."""
    write_parquet_shards({"id": np.arange(first, first + rows)}, directory, per_shard, row_group_size=group)
    return directory


def ident(item) -> int:
    """The id of a row: a ParquetStream's {"id": v} or an ArrayDataset's (v,)."""
    return int(item["id"] if isinstance(item, dict) else item[0])


class Plain(StreamDataset):
    """A stream without state_dict(): the mix resumes it by reading again and dropping items."""

    def __init__(self, first: int, rows: int) -> None:
        self.ids = list(range(first, first + rows))

    def __iter__(self):
        return iter({"id": i} for i in self.ids)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Two Parquet sets of uneven shards (ids 0-46 and 1000-1032) and a map dataset (2000-2020)."""
    root = tmp_path_factory.mktemp("mix")
    return {"a": (shards(root / "a", 0, 47, 10, 3), 47), "b": (shards(root / "b", 1000, 33, 7, 4), 33),
            "m": (ArrayDataset(np.arange(2000, 2021)), 21)}


def make(data, world: int = 1, rank: int = 0, **options) -> MixedStream:
    sources = {"a": ParquetStream(data["a"][0], shuffle=True, seed=4, world_size=world, rank=rank),
               "b": ParquetStream(data["b"][0], world_size=world, rank=rank), "m": data["m"][0]}
    return MixedStream(sources, options.pop("weights", [3, 1, 2]), seed=options.pop("seed", 7),
                       world_size=world, rank=rank, **options)


def expected(data) -> dict[str, list[int]]:
    return {"a": list(range(47)), "b": list(range(1000, 1033)), "m": list(range(2000, 2021))}


def source_of(i: int) -> str:
    return "a" if i < 1000 else "b" if i < 2000 else "m"


def read_all(data, world: int, workers: int, epoch: int, **options) -> dict[tuple[int, int], list[int]]:
    """(rank, worker) -> the ids that process reads in ``epoch``."""
    out = {}
    for rank in range(world):
        mix = make(data, world, rank, **options)
        mix.set_epoch(epoch)
        for worker in range(max(workers, 1)):
            with as_worker(worker, workers):
                out[rank, worker] = [ident(item) for item in mix]
    return out


def by_source(ids: list[int]) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {"a": [], "b": [], "m": []}
    for i in ids:
        found[source_of(i)].append(i)
    return found


def test_every_row_exactly_once_per_epoch_over_ranks_and_workers(data):
    for world in range(1, 5):
        for workers in range(4):
            for epoch in (0, 1):
                read = read_all(data, world, workers, epoch)
                delivered = by_source([i for ids in read.values() for i in ids])
                assert {k: sorted(v) for k, v in delivered.items()} == expected(data), (world, workers, epoch)


def block_size(length: int, parts: int, part: int) -> int:
    """Rows of block ``part`` when ``length`` rows are cut into ``parts`` blocks, the first ones larger."""
    size, extra = divmod(length, parts)
    return size + (part < extra)


def test_never_delivers_each_source_once_per_source_epoch():
    """Under stop="never" a map source's shards start a new permutation as they run out: the
    k-th pass of every shard, all shards together, is the whole dataset."""
    small = ArrayDataset(np.arange(2000, 2011))  # 11 rows, run out many times
    big = ArrayDataset(np.arange(10_000, 15_000))
    world, workers, passes = 2, 3, 4
    seen: dict[int, list[int]] = {k: [] for k in range(passes)}
    for rank in range(world):
        mix = MixedStream({"small": small, "big": big}, [1, 1], stop="never", seed=2, world_size=world, rank=rank)
        mix.set_epoch(0)
        for worker in range(workers):
            with as_worker(worker, workers):
                items = iter(mix)
                shard = [i for i in (ident(next(items)) for _ in range(200)) if i < 10_000]
                stats = mix.stats().sources[0]
            size = block_size(block_size(11, world, rank), workers, worker)
            assert stats.epoch >= passes and not stats.exhausted
            for k in range(passes):
                seen[k] += shard[k * size : (k + 1) * size]
    for k in range(passes):
        assert sorted(seen[k]) == list(range(2000, 2011))
    assert seen[0] != seen[1]  # each source epoch has its own permutation


def test_weights_give_the_fractions(data):
    """20,000 draws with stop="never" (no source runs out of the draw): each realized fraction is
    within 5 standard deviations of its weight's share."""
    weights = [1.0, 2.0, 5.0]
    mix = MixedStream([ArrayDataset(np.arange(100)), ArrayDataset(np.arange(7)), ArrayDataset(np.arange(1000))],
                      weights, stop="never", seed=11)
    items = iter(mix)
    draws = 20_000
    for _ in range(draws):
        next(items)
    stats = mix.stats()
    assert stats.items == draws and isinstance(stats, MixStats)
    for source, weight in zip(stats.sources, weights):
        share = weight / sum(weights)
        assert abs(source.fraction - share) < 5 * np.sqrt(share * (1 - share) / draws), source
    assert stats.fractions == {s.name: s.fraction for s in stats.sources}


def test_a_source_of_weight_zero_is_never_read(data):
    mix = MixedStream({"x": ArrayDataset(np.arange(10)), "never": ArrayDataset(np.arange(100, 110))}, {"x": 1, "never": 0})
    assert sorted(ident(i) for i in mix) == list(range(10))
    assert mix.stats().sources[1] == MixSourceStats("never", 0.0, 0, 0.0, 0, False)


def test_first_exhausted_ends_when_one_source_runs_out(data):
    mix = make(data, stop="first_exhausted", weights=[1, 1, 1])
    ids = [ident(item) for item in mix]
    stats = {s.name: s for s in mix.stats().sources}
    out = [name for name, s in stats.items() if s.exhausted]
    assert len(out) == 1
    delivered = by_source(ids)
    assert sorted(delivered[out[0]]) == expected(data)[out[0]]  # it ran out: all its rows came
    others = [name for name in stats if name != out[0]]
    assert all(len(delivered[n]) < len(expected(data)[n]) for n in others)
    assert sum(s.items for s in stats.values()) == len(ids)


def test_all_exhausted_counts_every_source_in_stats(data):
    mix = make(data)
    ids = [ident(item) for item in mix]
    stats = mix.stats()
    assert [(s.name, s.items, s.exhausted, s.epoch) for s in stats.sources] == [
        ("a", 47, True, 0), ("b", 33, True, 0), ("m", 21, True, 0)]
    assert stats.items == len(ids) == 101 and abs(sum(stats.fractions.values()) - 1) < 1e-12


def test_the_order_is_fixed_by_seed_and_epoch(data):
    def order(seed: int, epoch: int) -> list[int]:
        mix = make(data, seed=seed)
        mix.set_epoch(epoch)
        return [ident(item) for item in mix]

    assert order(7, 0) == order(7, 0)
    assert order(7, 0) != order(8, 0)
    assert order(7, 0) != order(7, 1)
    # Without set_epoch each iter() starts the next epoch, as a ParquetStream does.
    mix = make(data)
    assert [ident(i) for i in mix] == order(7, 0) and [ident(i) for i in mix] == order(7, 1)


def resumed_run(make_mix, epoch: int, workers: int, worker: int, cut: int, count: int | None = None) -> tuple[list, list]:
    """(uninterrupted, interrupted at ``cut`` and resumed in a fresh copy): ids of ``epoch``."""
    with as_worker(worker, workers):
        whole = make_mix()
        whole.set_epoch(epoch)
        full = [ident(i) for i in _take(iter(whole), count)]
        first = make_mix()
        first.set_epoch(epoch)
        items = iter(first)
        head = [ident(next(items)) for _ in range(min(cut, len(full)))]
        state = json.loads(json.dumps(first.state_dict()))  # plain values
        resumed = pickle.loads(pickle.dumps(make_mix()))
        resumed.set_epoch(epoch)
        resumed.load_state_dict(state)
        assert resumed.state_dict() == state
        rest = [ident(i) for i in _take(iter(resumed), None if count is None else count - len(head))]
    return full, head + rest


def _take(items, count):
    return items if count is None else (next(items) for _ in range(count))


@pytest.mark.parametrize("stop", ["all_exhausted", "first_exhausted", "never"])
def test_resume_at_random_points_gives_the_uninterrupted_run(data, stop):
    rng = np.random.default_rng(0)
    for world, workers in [(1, 0), (2, 3), (3, 2)]:
        for _ in range(4):
            rank, worker, epoch = int(rng.integers(world)), int(rng.integers(max(workers, 1))), int(rng.integers(2))
            sources_extra = Plain(3000, 12)  # resumed by reading again: no state_dict

            def make_mix():
                mix = make(data, world, rank, stop=stop, weights=[3, 1, 2])
                return MixedStream({**mix.sources, "plain": sources_extra}, [3, 1, 2, 1], stop=stop, seed=7,
                                   world_size=world, rank=rank)

            count = 150 if stop == "never" else None
            cut = int(rng.integers(0, 120))
            full, resumed = resumed_run(make_mix, epoch, workers, worker, cut, count)
            assert resumed == full, (world, workers, rank, worker, cut)


def test_a_state_of_another_epoch_is_refused(data):
    mix = make(data)
    items = iter(mix)
    next(items)
    state = mix.state_dict()
    other = make(data)
    other.set_epoch(1)
    other.load_state_dict(state)
    with pytest.raises(ArgumentValueError, match="is a position in epoch 0, but this iter"):
        iter(other)


def test_it_pickles_mid_epoch_without_its_readers(data):
    mix = make(data)
    items = iter(mix)
    first = [ident(next(items)) for _ in range(5)]
    copy = pickle.loads(pickle.dumps(mix))
    # afresh, counting on from the 5 items drawn (what a weight schedule reads)
    assert copy.state_dict() == {"epoch": 1, "draws": 0, "drawn": 5, "sources": {}, "order": mix.state_dict()["order"]}
    whole = make(data)
    assert [ident(i) for i in whole][:5] == first
    assert [ident(i) for i in copy] == [ident(i) for i in whole]  # both read epoch 1 whole


def loader_ids(loader) -> list[int]:
    return [int(i) for batch in loader for i in batch["id"]]


@pytest.mark.parametrize("batched", [False, True])
def test_a_loader_with_two_workers_reads_every_row_once(data, batched):
    """Real worker processes, each reading its share of the mix."""
    size = 4 if batched else None
    world = 2
    delivered = []
    for rank in range(world):
        sources = [ParquetStream(data["a"][0], batch_size=size, world_size=world, rank=rank),
                   ParquetStream(data["b"][0], batch_size=size, shuffle=True, world_size=world, rank=rank)]
        mix = MixedStream(sources, [2, 1], world_size=world, rank=rank)
        assert mix.yields_batches is batched and mix.batch_size == size
        sampler = StreamSampler() if batched else StreamSampler(batch_size=5)
        loader = DataLoader(mix, sampler, num_workers=2, parallel_stream=True, multiprocessing_context="fork")
        delivered += loader_ids(loader)
    assert sorted(delivered) == list(range(47)) + list(range(1000, 1033))


def test_a_loader_resumes_the_mix_exactly(data):
    def loader() -> DataLoader:
        sources = {"a": ParquetStream(data["a"][0], shuffle=True), "b": ParquetStream(data["b"][0]),
                   "p": Plain(3000, 12)}
        return DataLoader(MixedStream(sources, [2, 1, 1], seed=3), StreamSampler(batch_size=4), num_workers=2)

    full = [loader_ids(l) for l in [loader()] for _ in range(2)]
    for cut in (0, 3, 11):
        first = loader()
        with iter(first) as batches:
            head = [int(i) for _ in range(cut) for i in next(batches)["id"]]
            state = first.state_dict()
        assert cut == 0 or state["source"]["stream"]["draws"] == 4 * cut  # the mix's own position
        resumed = loader()
        resumed.load_state_dict(state)
        assert head + loader_ids(resumed) == full[0]
        assert loader_ids(resumed) == full[1]


def test_a_parallel_stream_loader_resumes_with_skip_ahead(data):
    def loader() -> DataLoader:
        mix = MixedStream([ParquetStream(data["a"][0]), ArrayDataset(np.arange(2000, 2021))], seed=5)
        return DataLoader(mix, StreamSampler(batch_size=4), num_workers=2, parallel_stream=True,
                          multiprocessing_context="fork", collator=lambda rows: {"id": np.array([ident(r) for r in rows])})

    full = loader_ids(loader())
    first = loader()
    with iter(first) as batches:
        head = [int(i) for _ in range(5) for i in next(batches)["id"]]
        state = first.state_dict()
    resumed = loader()
    resumed.load_state_dict(state, skip_ahead=True)
    assert head + loader_ids(resumed) == full


def test_the_fingerprint_names_what_decides_the_order(data):
    fingerprint = make(data).order_fingerprint()
    assert json.loads(json.dumps(fingerprint)) == fingerprint
    assert fingerprint["weights"] == [3.0, 1.0, 2.0] and fingerprint["stop"] == "all_exhausted"
    assert fingerprint["sources"]["a"]["shuffle"] is True  # the ParquetStream's own
    assert fingerprint["sources"]["m"] == {"type": "dataloader.dataset.ArrayDataset", "length": 21}
    assert make(data, seed=1).order_fingerprint() != fingerprint


ROWS = ArrayDataset(np.arange(4))


@pytest.mark.parametrize("call,error,message", [
    (lambda: MixedStream([]), ArgumentValueError, "`sources` is empty"),
    (lambda: MixedStream("ab"), ArgumentTypeError, "`sources` must be a list of sources or a dict"),
    (lambda: MixedStream({1: ROWS}), ArgumentTypeError, "named by non-empty strings"),
    (lambda: MixedStream([ROWS, 3]), ArgumentTypeError, "source '1' must be a stream"),
    (lambda: MixedStream([ROWS, iter([1])]), ArgumentTypeError, "is an iterator"),
    (lambda: MixedStream([ROWS, ROWS], [1]), ArgumentValueError, "2 sources, 1 weights"),
    (lambda: MixedStream([ROWS, ROWS], [1, -1]), ArgumentValueError, r"`weights\['1'\]` must be a number >= 0"),
    (lambda: MixedStream([ROWS, ROWS], [1, float("nan")]), ArgumentValueError, "must be a number >= 0"),
    (lambda: MixedStream([ROWS, ROWS], [1, float("inf")]), ArgumentValueError, "must be a finite number"),
    (lambda: MixedStream([ROWS, ROWS], [0, 0]), ArgumentValueError, "are all 0"),
    (lambda: MixedStream([ROWS, ROWS], "11"), ArgumentTypeError, "`weights` must be a list of numbers"),
    (lambda: MixedStream({"x": ROWS}, {"y": 1}), ArgumentValueError, "one weight per source name"),
    (lambda: MixedStream([ROWS], stop="longest"), ArgumentValueError, "`stop` must be one of"),
])
def test_bad_arguments_are_clear_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_sources_that_disagree_are_refused(data):
    batches = ParquetStream(data["a"][0], batch_size=4)
    with pytest.raises(ArgumentValueError, match=r"the sources \['0'\] yield whole batches .* but \['1'\] yield rows"):
        MixedStream([batches, ROWS])
    with pytest.raises(ArgumentValueError, match="source '0' is sharded for world_size=2, rank=1"):
        MixedStream([ParquetStream(data["a"][0], world_size=2, rank=1), ROWS])


def test_bad_states_are_refused(data):
    mix = make(data)
    order = mix.state_dict()["order"]
    with pytest.raises(ArgumentValueError, match="a dict of 'epoch', 'draws', 'sources' and 'order'"):
        mix.load_state_dict({"rows": 3})
    with pytest.raises(ArgumentValueError, match="older version holds no 'order'"):
        mix.load_state_dict({"epoch": 0, "draws": 0, "sources": {}})
    with pytest.raises(ArgumentValueError, match=r"holds the sources \['z'\], which this mix does not have"):
        mix.load_state_dict({"epoch": 0, "draws": 0, "sources": {"z": {}}, "order": order})
    with pytest.raises(ArgumentValueError, match="the state of source 'a' must hold"):
        mix.load_state_dict({"epoch": 0, "draws": 0, "sources": {"a": {"epoch": 0}}, "order": order})
    with pytest.raises(ArgumentValueError, match=r"saved by a mix with order='junk'; this mix has order=\{"):
        mix.load_state_dict({"epoch": 0, "draws": 0, "sources": {}, "order": "junk"})  # names the field

    class Live(Plain):
        resume_refused = "a live feed has no position to go back to."

    live = MixedStream({"live": Live(0, 5), "m": ROWS})
    items = iter(live)
    while live.state_dict()["sources"]["live"]["taken"] == 0:
        next(items)
    with pytest.raises(ArgumentValueError, match="source 'live' cannot resume: a live feed"):
        MixedStream({"live": Live(0, 5), "m": ROWS}).load_state_dict(live.state_dict())


def _started(mix: MixedStream, items: int = 3) -> dict:
    """``mix``'s state after ``items`` items, as saved and loaded (JSON)."""
    read = iter(mix)
    for _ in range(items):
        next(read)
    return json.loads(json.dumps(mix.state_dict()))


def _maps(**options) -> MixedStream:
    sources = options.pop("sources", {"x": ArrayDataset(np.arange(10)), "y": ArrayDataset(np.arange(100, 120))})
    return MixedStream(sources, options.pop("weights", [1, 2]), **{"seed": 3, **options})


@pytest.mark.parametrize("other,field", [
    (dict(weights=[2, 1]), "weights=[1.0, 2.0]; this mix has weights=[2.0, 1.0]"),
    (dict(seed=4), "seed=3; this mix has seed=4"),
    (dict(stop="never"), "stop='all_exhausted'; this mix has stop='never'"),
    (dict(world_size=2, rank=1), "rank 0 of a world of 1; this mix is rank 1 of 2"),  # pass every rank's
    (dict(sources={"x": ArrayDataset(np.arange(11)), "y": ArrayDataset(np.arange(100, 120))}), "sources="),
])
def test_a_state_of_another_mix_is_refused_when_loaded_directly(other, field):
    """Item 4 of issue 45: a DataLoader refused the state of a mix with other weights, seed, stop,
    world or sources, but MixedStream.load_state_dict itself took it and resumed at a position
    that means other items. Both now refuse, with the same check (``_digest.first_difference``)."""
    state = _started(_maps())
    with pytest.raises(ArgumentValueError, match=r"saved by (a mix with )?" + re.escape(field)):
        _maps(**other).load_state_dict(state)
    same = _maps()
    same.load_state_dict(state)  # the mix that saved it takes it
    assert same.state_dict() == state


def test_a_loader_and_a_direct_load_refuse_another_mix_alike():
    """The loader's refusal names the same field the mix's does."""
    def loader(weights) -> DataLoader:
        return DataLoader(_maps(weights=weights), StreamSampler(batch_size=2))

    first = loader([1, 2])
    with iter(first) as batches:
        next(batches)
        state = first.state_dict()
    with pytest.raises(ArgumentValueError, match=r"stream\.weights=\[1\.0, 2\.0\]; this loader has stream\.weights"):
        loader([2, 1]).load_state_dict(state)
    with pytest.raises(ArgumentValueError, match=r"weights=\[1\.0, 2\.0\]; this mix has weights=\[2\.0, 1\.0\]"):
        _maps(weights=[2, 1]).load_state_dict(state["source"]["stream"])


@pytest.mark.parametrize("weights", [[1e308, 1e308], [1.7e308, 1.7e308, 1.7e308], [5e-324, 5e-324]])
def test_weights_whose_sum_overflows_give_their_shares(weights):
    """Item 5 of issue 45: weights [1e308, 1e308] (finite, their sum not) gave every draw to one
    source with only a NumPy RuntimeWarning. They are equal weights: each source's share holds
    (within 5 standard deviations of 4,000 draws), and NumPy warns of nothing."""
    sources = [ArrayDataset(np.arange(100 * n, 100 * n + 50)) for n in range(len(weights))]
    mix = MixedStream(sources, weights, stop="never", seed=1)
    draws = 4000
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        items = iter(mix)
        for _ in range(draws):
            next(items)
    share = 1 / len(weights)
    for source in mix.stats().sources:
        assert abs(source.fraction - share) < 5 * np.sqrt(share * (1 - share) / draws), source


def test_weights_far_apart_and_negative_zero():
    """A weight 1e-300 beside 1e300 is drawn only once the other ran out (its share is below any
    float); -0.0 is the weight 0 (never read), saved as 0.0."""
    mix = MixedStream([ArrayDataset(np.arange(5)), ArrayDataset(np.arange(100, 105)), ArrayDataset(np.arange(200, 203))],
                      [1e300, 1e-300, -0.0], seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ids = [ident(item) for item in mix]
    assert sorted(ids[:5]) == list(range(5)) and sorted(ids[5:]) == list(range(100, 105))
    assert json.dumps(mix.order_fingerprint()["weights"]) == "[1e+300, 1e-300, 0.0]"


@pytest.mark.parametrize("weights,error,message", [
    ([True, 1], ArgumentTypeError, r"`weights\['0'\]` must be a number >= 0; got True"),
    ([1, float("-inf")], ArgumentValueError, r"`weights\['1'\]` must be a number >= 0"),
    ([1e308, float("inf")], ArgumentValueError, r"`weights\['1'\]` must be a finite number; got inf"),
    ([1, 10**400], ArgumentValueError, r"`weights\['1'\]` must be a number >= 0 that fits a float"),
    ([0.0, -0.0], ArgumentValueError, "are all 0"),
])
def test_weights_that_cannot_be_shares_are_refused(weights, error, message):
    with pytest.raises(error, match=message):
        MixedStream([ROWS, ROWS], weights)


def test_int64_and_float64_sources_keep_integers_exact(tmp_path):
    """Item 6 of issue 45: a mix of an int64 and a float64 source made one float64 column of
    their rows, and 2**60 + 1, + 3, + 5 all became 2**60. Integers a float64 holds exactly are
    still collated so; any other is a CollateError naming the field, the integer and the dtypes."""
    from dataloader.errors import CollateError

    write_parquet_shards({"id": np.array([2**60 + 1, 2**60 + 3, 2**60 + 5])}, tmp_path / "big", 10)
    write_parquet_shards({"id": np.array([1, 2, 3])}, tmp_path / "small", 10)
    write_parquet_shards({"id": np.array([0.5, 1.5, 2.5])}, tmp_path / "float", 10)

    def batch(ints: str) -> dict:
        mix = MixedStream([ParquetStream(tmp_path / ints), ParquetStream(tmp_path / "float")], seed=0)
        return next(iter(DataLoader(mix, StreamSampler(batch_size=6))))

    assert sorted(batch("small")["id"].tolist()) == [0.5, 1, 1.5, 2, 2.5, 3]
    with pytest.raises(CollateError, match=r"`sample\['id'\]`: the integer 11529215046068469\d\d in sample \d "
                                           r"\(numpy\.int64\) would change in the float64 column"):
        batch("big")
