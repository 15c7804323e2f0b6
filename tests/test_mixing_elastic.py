"""MixedStream on another number of ranks: the list of every old rank's state continues the old
ranks' remaining items on the new world (map sources and a stream with the list protocol),
nothing lost and nothing repeated, exact resume and a second reshard of the new world's states,
and the errors for lists that do not fit."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataloader import ArrayDataset, MixedStream, StreamDataset
from dataloader._shares import block
from dataloader.errors import ArgumentValueError


class Sharded(StreamDataset):
    """A stream of ids ``first ..`` shuffled per epoch, cut into one block per rank, whose state
    loads on another world from the list of every old rank's state (as ParquetStream's does):
    the old ranks' rows left, in rank order, cut anew (``layout``: one [world, [read...]] per reshard)."""

    loads_rank_states = True

    def __init__(self, first: int, count: int, world_size: int, rank: int) -> None:
        self.first, self.count, self.world_size, self.rank = first, count, world_size, rank
        self._epoch, self._layout, self._start, self._read = 0, [], 0, 0

    def set_epoch(self, epoch: int) -> None:
        self._epoch, self._layout, self._start = epoch, [], 0

    def _rows(self) -> list[int]:
        rows = self.first + np.random.default_rng([5, self._epoch]).permutation(self.count)
        for world, read in self._layout:
            rows = np.concatenate([rows[slice(*block(len(rows), world, r))][done:] for r, done in enumerate(read)])
        return rows[slice(*block(len(rows), self.world_size, self.rank))].tolist()

    def __iter__(self):
        rows, self._read, self._start = self._rows(), self._start, 0

        def rest():
            while self._read < len(rows):
                self._read += 1
                yield (np.int64(rows[self._read - 1]),)  # a row, as an ArrayDataset's
        return rest()

    def state_dict(self) -> dict[str, Any]:
        return {"epoch": self._epoch, "read": self._read, "layout": self._layout, "world": self.world_size,
                "rank": self.rank}

    def load_state_dict(self, state: Any) -> None:
        if isinstance(state, list):
            assert [s["rank"] for s in state] == list(range(len(state))) == list(range(state[0]["world"]))
            self._epoch, self._start = state[0]["epoch"], 0
            self._layout = [*state[0]["layout"], [len(state), [s["read"] for s in state]]]
            return
        assert (state["world"], state["rank"]) == (self.world_size, self.rank)
        self._epoch, self._layout, self._start = state["epoch"], state["layout"], state["read"]


def mix(sizes: tuple[int, int, int], world: int, rank: int, weights=(1, 2, 1), **options) -> MixedStream:
    sources = {"m": ArrayDataset(np.arange(sizes[0])), "s": Sharded(1000, sizes[1], world, rank),
               "n": ArrayDataset(np.arange(2000, 2000 + sizes[2]))}
    return MixedStream(sources, list(weights), seed=options.pop("seed", 3), world_size=world, rank=rank, **options)


def ident(item: Any) -> int:
    return int(item[0]) if isinstance(item, tuple) else int(item)


def read(stream: MixedStream, count: int | None = None) -> list[int]:
    items = iter(stream)
    return [ident(x) for _, x in zip(range(count) if count is not None else iter(int, 1), items)]


def everything(sizes: tuple[int, int, int]) -> list[int]:
    return sorted([*range(sizes[0]), *range(1000, 1000 + sizes[1]), *range(2000, 2000 + sizes[2])])


def phase(sizes, world: int, states: list | None, cuts: list[int | None], epoch: int = 0, **options):
    """Each rank of ``world`` loads ``states`` (when given) and reads ``cuts[rank]`` items (None:
    to the end): what they read and their states, as JSON gives them back."""
    got, saved = [], []
    for rank in range(world):
        stream = mix(sizes, world, rank, **options)
        stream.set_epoch(epoch)
        if states is not None:
            stream.load_state_dict(states)
        got += read(stream, cuts[rank])
        saved.append(json.loads(json.dumps(stream.state_dict())))
    return got, saved


@settings(max_examples=40, deadline=None)
@given(sizes=st.tuples(st.integers(0, 40), st.integers(0, 40), st.integers(0, 40)),
       worlds=st.tuples(st.integers(1, 6), st.integers(1, 6), st.integers(1, 6)),
       cuts=st.lists(st.integers(0, 40), min_size=12, max_size=12), epoch=st.integers(0, 1),
       weights=st.tuples(st.floats(0.1, 4), st.floats(0.1, 4), st.floats(0.1, 4)))
def test_nothing_lost_nothing_repeated_over_two_reshards(sizes, worlds, cuts, epoch, weights):
    first, second, third = worlds
    before, states = phase(sizes, first, None, cuts[:6], epoch, weights=weights)
    middle, again = phase(sizes, second, states, cuts[6:], epoch, weights=weights)  # W -> W'
    after, _ = phase(sizes, third, again, [None] * third, epoch, weights=weights)  # W' -> W''
    assert sorted(before + middle + after) == everything(sizes)


@settings(max_examples=30, deadline=None)
@given(sizes=st.tuples(st.integers(0, 30), st.integers(0, 30), st.integers(0, 30)),
       old=st.integers(1, 6), new=st.integers(1, 6), cuts=st.lists(st.integers(0, 30), min_size=6, max_size=6),
       later=st.integers(0, 30))
def test_a_state_of_the_new_world_resumes_exactly(sizes, old, new, cuts, later):
    _, states = phase(sizes, old, None, cuts)
    for rank in range(new):
        whole = mix(sizes, new, rank)
        whole.load_state_dict(states)
        expected = read(whole)
        first = mix(sizes, new, rank)
        first.load_state_dict(states)
        head = read(first, later)
        again = mix(sizes, new, rank)
        again.load_state_dict(json.loads(json.dumps(first.state_dict())))
        assert head + read(again) == expected


def test_the_same_world_loads_its_own_state_from_the_list():
    sizes = (30, 30, 30)
    _, states = phase(sizes, 3, None, [10, 11, 12])
    for rank in range(3):
        whole = mix(sizes, 3, rank)
        expected = read(whole)
        listed = mix(sizes, 3, rank)
        listed.load_state_dict(states)
        assert read(whole, 0) == [] and [10, 11, 12][rank] + len(read(listed)) == len(expected)


def test_the_new_rank_counts_on_from_the_largest_old_count_with_draws_of_its_own():
    sizes = (40, 40, 40)
    _, states = phase(sizes, 2, None, [7, 9])
    stream = mix(sizes, 3, 1)
    stream.load_state_dict(states)
    assert stream.drawn == 9 and stream.state_dict()["reshards"] == 1
    assert stream.state_dict()["sources"]["m"]["layout"] == [[2, [states[0]["sources"]["m"]["taken"],
                                                                  states[1]["sources"]["m"]["taken"]]]]
    got = read(stream)
    assert stream.state_dict()["reshards"] == 1 and stream.drawn == 9 + len(got)


def test_lists_that_do_not_fit_are_refused():
    sizes = (20, 20, 20)
    _, states = phase(sizes, 3, None, [4, 5, 6])
    target = mix(sizes, 2, 0)
    with pytest.raises(ArgumentValueError, match="rank 0 of a world of 3; this mix is rank 0 of 2.*list of every"):
        target.load_state_dict(states[0])
    with pytest.raises(ArgumentValueError, match="the list holds 2 states, saved by worlds of"):
        target.load_state_dict(states[:2])
    with pytest.raises(ArgumentValueError, match=r"the states are of the ranks \[1, 0, 2\]"):
        target.load_state_dict([states[1], states[0], states[2]])
    _, later = phase(sizes, 3, None, [4, 5, 6], epoch=1)
    with pytest.raises(ArgumentValueError, match=r"positions in the epochs \[0, 1, 0\]"):
        target.load_state_dict([states[0], later[1], states[2]])
    other = MixedStream({"m": ArrayDataset(np.arange(20)), "n": ArrayDataset(np.arange(20))}, world_size=2, rank=0)
    with pytest.raises(ArgumentValueError, match="sources"):
        other.load_state_dict(states)
    with pytest.raises(ArgumentValueError, match="the list of states is empty"):
        target.load_state_dict([])


class Plain(StreamDataset):
    def __iter__(self):
        return iter(range(5000, 5010))


def test_a_stream_without_a_state_reshards_only_where_untouched_or_read_out():
    def plain(world: int, rank: int, weights) -> MixedStream:
        return MixedStream({"m": ArrayDataset(np.arange(20)), "p": Plain()}, weights, world_size=world, rank=rank)

    untouched = [json.loads(json.dumps((lambda s: (read(s, 3), s.state_dict())[1])(plain(2, r, [1, 0]))))
                 for r in range(2)]
    fresh = plain(3, 0, [1, 1])
    fresh.load_state_dict(untouched, reweight=True)
    assert sorted(i for i in read(fresh) if i >= 5000) == list(range(5000, 5010))  # p starts afresh
    touched = [json.loads(json.dumps((lambda s: (read(s, 12), s.state_dict())[1])(plain(2, r, [1, 1]))))
               for r in range(2)]
    with pytest.raises(ArgumentValueError, match="source 'p' is a stream without a state of its own"):
        plain(3, 0, [1, 1]).load_state_dict(touched)


def test_stop_never_with_ranks_in_other_source_epochs_is_refused():
    sizes = (4, 30, 30)
    _, states = phase(sizes, 2, None, [40, 0], stop="never")
    assert states[0]["sources"]["m"]["epoch"] != states[1]["sources"]["m"]["epoch"]
    with pytest.raises(ArgumentValueError, match="source 'm' is in the source epochs"):
        mix(sizes, 3, 0, stop="never").load_state_dict(states)


def test_an_edited_layout_is_refused():
    _, states = phase((20, 20, 20), 2, None, [4, 5])
    stream = mix((20, 20, 20), 3, 0)
    stream.load_state_dict(states)
    state = stream.state_dict()
    state["sources"]["m"]["layout"] = [[2, [1]]]  # a taken for one rank of two
    with pytest.raises(ArgumentValueError, match=r"\['layout'\] must be a list of \[world_size"):
        mix((20, 20, 20), 3, 0).load_state_dict(state)


def test_a_loader_resumes_a_mix_of_four_ranks_on_three(no_leaks):
    from dataloader import DataLoader, StreamSampler

    def loader(world: int, rank: int, workers: int) -> DataLoader:
        stream = mix((60, 50, 40), world, rank)
        return DataLoader(stream, StreamSampler(batch_size=5), num_workers=workers)

    seen, states = [], []
    for rank in range(4):
        old = loader(4, rank, 0)
        batches = iter(old)
        seen += [int(i) for _ in range(2) for i in next(batches)[0]]
        states.append(old.state_dict())
        del batches
        old.close()
    for rank in range(3):
        new = loader(3, rank, 2)
        new.load_state_dict(states)
        seen += [int(i) for batch in new for i in batch[0]]
    assert sorted(seen) == everything((60, 50, 40))


def test_parquet_and_map_sources_reshard_two_ranks_to_three_and_back(tmp_path):
    from dataloader import ParquetStream, write_parquet_shards

    write_parquet_shards({"id": np.arange(0, 97)}, tmp_path / "a", 10, row_group_size=3)

    def parquet_mix(world: int, rank: int) -> MixedStream:
        stream = ParquetStream(tmp_path / "a", shuffle=True, seed=4, world_size=world, rank=rank)
        return MixedStream({"a": stream, "m": ArrayDataset(np.arange(2000, 2041))}, [2, 1], seed=7,
                           world_size=world, rank=rank)

    def row(item: Any) -> int:
        return int(item["id"] if isinstance(item, dict) else item[0])

    seen, states, again = [], [], []
    for rank in range(2):
        stream = parquet_mix(2, rank)
        items = iter(stream)
        seen += [row(next(items)) for _ in range(17 + rank)]
        states.append(json.loads(json.dumps(stream.state_dict())))
    for rank in range(3):  # 2 -> 3, each reads 5
        stream = parquet_mix(3, rank)
        stream.load_state_dict(states)
        items = iter(stream)
        seen += [row(next(items)) for _ in range(5)]
        again.append(json.loads(json.dumps(stream.state_dict())))
    for rank in range(2):  # 3 -> 2, to the end
        stream = parquet_mix(2, rank)
        stream.load_state_dict(again)
        seen += [row(item) for item in stream]
    assert sorted(seen) == [*range(97), *range(2000, 2041)]
