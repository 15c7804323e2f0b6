"""Columnar streams resumed on another world size: every rank's states in, nothing lost or repeated out.

Ranks are simulated by several stream instances in one process (``world_size``/``rank``
arguments), each read by its main process as a loader with ``parallel_stream=False`` reads it.
"""

from __future__ import annotations

import collections
import itertools
import json
import pickle
import tempfile
from pathlib import Path

import numpy as np
import pyarrow.dataset as ds
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from dataloader import TarStream
from dataloader.columnar import ArrowStream, ParquetStream
from dataloader.columnar._planner import Planner, remainder
from dataloader.columnar._scattered import scattered
from dataloader.columnar._sharding import Piece
from dataloader.errors import ArgumentValueError
from tests.columnar.test_streams import ids, write
from tests.columnar.test_tar_stream import ids as tar_ids
from tests.columnar.test_tar_stream import write_plain

FAST = settings(max_examples=30, deadline=None)

layouts = st.lists(st.lists(st.integers(0, 12), min_size=1, max_size=3), min_size=1, max_size=3)
options = st.fixed_dictionaries({
    "batch_size": st.one_of(st.none(), st.integers(1, 4)), "shuffle": st.booleans(),
    "shuffle_buffer": st.sampled_from([0, 3, 5]), "equal": st.booleans(), "surplus": st.sampled_from(["drop", "carry"]),
})


def _options(drawn: dict) -> dict:
    return {**drawn, "surplus": drawn["surplus"] if drawn["equal"] else "drop", "seed": 7}


def _fits(rows: int, worlds: tuple[int, ...], drawn: dict) -> bool:
    """Whether equal=True can be built for every world (it needs world_size * batch_size rows)."""
    return not drawn["equal"] or rows >= max(worlds) * (drawn["batch_size"] or 1)


def take(stream, epoch: int, count: int, read=ids) -> tuple[list[int], dict]:
    """The ids of the first ``count`` items ``stream`` yields in ``epoch`` (fewer if it ends), and its state then."""
    stream.set_epoch(epoch)
    items = list(itertools.islice(stream, count))  # pulls no item past them
    return read(items), stream.state_dict()


def run_world(make, world: int, counts: list[int], epoch: int = 0, states=None, read=ids):
    """Every rank of ``world`` (loading ``states`` when given) reads ``counts[rank]`` items of
    ``epoch``: (the ids all ranks delivered, their states, rank 0's stream)."""
    delivered, saved, streams = [], [], []
    for rank in range(world):
        stream = make(world_size=world, rank=rank)
        if states is not None:
            stream.load_state_dict(states)
        got, state = take(stream, epoch, counts[rank], read)
        delivered += got
        saved.append(state)
        streams.append(stream)
    return delivered, saved, streams


def check_epoch(rows: int, delivered: list[int], stats) -> list[int]:
    """Every row of the epoch exactly once, but the surplus ``stats`` counts; the rows left out."""
    assert len(delivered) == len(set(delivered))
    missing = sorted(set(range(rows)) - set(delivered))
    assert set(delivered) <= set(range(rows))
    assert len(missing) == stats.dropped + stats.carried
    return missing


def check_carried_arrive(streams: list, missing: list[int], carried: int) -> None:
    """The next epoch of ``streams`` (every rank's, after the resharded one) delivers the
    carried rows (and its own rows at most once)."""
    following = []
    for stream in streams:
        stream.set_epoch(1)
        following += ids(list(stream))
    count = collections.Counter(following)
    assert streams[0].stats().carried_in == carried
    if carried:
        assert all(count[i] >= 1 for i in missing)
    assert all(n == 1 or (n == 2 and i in missing) for i, n in count.items())


@FAST
@given(layout=layouts, worlds=st.tuples(st.integers(1, 8), st.integers(1, 8)), drawn=options,
       steps=st.integers(0, 6), differ=st.lists(st.integers(0, 6), min_size=8, max_size=8), synchronous=st.booleans())
def test_a_new_world_delivers_what_the_old_ranks_had_not(layout, worlds, drawn, steps, differ, synchronous):
    with tempfile.TemporaryDirectory() as folder:
        rows = write(Path(folder), layout)
        assume(_fits(rows, worlds, drawn))
        old, new = worlds

        def make(**world):
            return ParquetStream(folder, **_options(drawn), **world)

        before, states, _ = run_world(make, old, [steps] * old if synchronous else differ)
        after, _, streams = run_world(make, new, [10**6] * new, states=states)
        stats = streams[0].stats()
        missing = check_epoch(rows, before + after, stats)
        # Every new rank the same number of full batches: a new world cuts the rest afresh; the
        # same world takes each rank's own state, so ranks out of step stay so.
        if drawn["equal"] and drawn["batch_size"] and (old != new or synchronous):
            sizes = {len(stream_ids) for stream_ids in _per_rank(make, new, states)}
            assert len(sizes) == 1
        if stats.carried:
            check_carried_arrive(streams, missing, stats.carried)


def _per_rank(make, world: int, states: list[dict]) -> list[list[int]]:
    out = []
    for rank in range(world):
        stream = make(world_size=world, rank=rank)
        stream.load_state_dict(states)
        stream.set_epoch(0)
        out.append(ids(list(stream)))
    return out


@settings(max_examples=25, deadline=None)
@given(layout=layouts, worlds=st.tuples(st.integers(1, 5), st.integers(1, 5), st.integers(1, 5)), drawn=options,
       first=st.integers(0, 4), second=st.integers(0, 4))
def test_a_resharded_epoch_reshards_again_and_its_carry_arrives(layout, worlds, drawn, first, second):
    with tempfile.TemporaryDirectory() as folder:
        rows = write(Path(folder), layout)
        assume(_fits(rows, worlds, drawn))
        one, two, three = worlds

        def make(**world):
            return ParquetStream(folder, **_options(drawn), **world)

        head, states, _ = run_world(make, one, [first] * one)
        middle, states, _ = run_world(make, two, [second] * two, states=states)
        assert all(s.get("reshards") for s in states) or one == two
        tail, _, streams = run_world(make, three, [10**6] * three, states=states)
        stats = streams[0].stats()
        missing = check_epoch(rows, head + middle + tail, stats)
        if stats.carried:
            check_carried_arrive(streams, missing, stats.carried)


@settings(max_examples=25, deadline=None)
@given(layout=layouts, worlds=st.tuples(st.integers(1, 6), st.integers(1, 6)), drawn=options,
       steps=st.integers(0, 5), cut=st.integers(0, 5), rank=st.integers(0, 5))
def test_a_state_taken_in_the_resharded_epoch_resumes_exactly_on_its_world(layout, worlds, drawn, steps, cut, rank):
    with tempfile.TemporaryDirectory() as folder:
        rows = write(Path(folder), layout)
        assume(_fits(rows, worlds, drawn))
        old, new = worlds
        rank %= new

        def make(**world):
            return ParquetStream(folder, **_options(drawn), **world)

        _, states, _ = run_world(make, old, [steps] * old)
        whole = _per_rank(make, new, states)[rank]
        assert _per_rank(make, new, states)[rank] == whole  # the resharded epoch is reproducible
        stream = make(world_size=new, rank=rank)
        stream.load_state_dict(states)
        head, state = take(stream, 0, cut)
        again = make(world_size=new, rank=rank)
        again.load_state_dict(json.loads(json.dumps(state)))  # plain JSON values
        again.set_epoch(0)
        assert head + ids(list(again)) == whole
        for copy in (stream, pickle.loads(pickle.dumps(stream))):  # the epoch after: a normal one of the new world
            copy.set_epoch(1)
            after = ids(list(copy))
            assert after == ids(list(copy))
        if drawn["surplus"] == "carry" and drawn["equal"]:  # the state of epoch 1 still rebuilds the carry
            _, state = take(stream, 1, 1)
            fresh = make(world_size=new, rank=rank)
            fresh.load_state_dict(state)
            fresh.set_epoch(1)
            assert after[state["rows"]:] == ids(list(fresh))


@settings(max_examples=25, deadline=None)
@given(layout=layouts, world=st.integers(1, 5), buffer=st.sampled_from([0, 3, 4]), shuffle=st.booleans(),
       batch_size=st.integers(1, 3), equal=st.booleans(), done=st.integers(0, 30))
def test_an_old_ranks_remainder_is_what_it_would_have_delivered_next(layout, world, buffer, shuffle, batch_size, equal, done):
    with tempfile.TemporaryDirectory() as folder:
        rows = write(Path(folder), layout)
        assume(_fits(rows, (world,), {"equal": equal, "batch_size": batch_size}))
        firsts = np.cumsum([0] + [size for sizes in layout for size in sizes])
        for rank in range(world):
            stream = ParquetStream(folder, world_size=world, rank=rank, shuffle=shuffle, shuffle_buffer=buffer,
                                   batch_size=batch_size, equal=equal, seed=3)
            stream.set_epoch(2)
            order = ids(list(stream))
            planner = stream._planner
            done = min(done, len(order))
            pieces = remainder(planner.plan(2), rank, done, planner.layout)
            rest = [int(firsts[unit]) + row for unit, start, stop in pieces for row in range(start, stop)]
            # the window in progress goes on in its permuted order; later windows are not yet drawn
            window = len(order) - done if buffer <= 1 else -done % buffer
            assert rest[:window] == order[done : done + window]
            assert sorted(rest) == sorted(order[done:])


@pytest.mark.parametrize("cls, kind", [(ParquetStream, "parquet"), (ArrowStream, "arrow")])
def test_a_list_from_the_same_world_loads_this_ranks_own_state(tmp_path, cls, kind):
    write(tmp_path, [[5, 7], [6, 4]], kind)

    def make(**world):
        return cls(tmp_path, batch_size=2, shuffle=True, shuffle_buffer=3, seed=1, **world)

    _, states, _ = run_world(make, 3, [2, 1, 3])
    for rank in range(3):
        listed, single = make(world_size=3, rank=rank), make(world_size=3, rank=rank)
        listed.load_state_dict(states)
        single.load_state_dict(states[rank])
        for stream in (listed, single):
            stream.set_epoch(0)
        assert ids(list(listed)) == ids(list(single)) and "reshards" not in states[rank]
    one = make(world_size=1, rank=0)
    _, [state], _ = run_world(make, 1, [2])
    one.load_state_dict([state])
    one.set_epoch(0)
    assert len(ids(list(one))) == 22 - 4


def test_tar_shards_resume_on_another_world(tmp_path):
    rows = write_plain(tmp_path, [9, 4, 7, 5])

    def make(**world):
        return TarStream(tmp_path, shuffle=True, shuffle_buffer=4, equal=True, surplus="carry", seed=2, **world)

    before, states, _ = run_world(make, 4, [3] * 4, read=tar_ids)
    after, _, streams = run_world(make, 3, [10**6] * 3, states=states, read=tar_ids)
    stats = streams[0].stats()
    missing = check_epoch(rows, before + after, stats)
    following = []
    for stream in streams:
        stream.set_epoch(1)
        following += tar_ids(list(stream))
    assert set(missing) <= set(following) and stats.carried == len(missing) > 0


def test_wrong_lists_and_single_states_of_another_world_are_refused(tmp_path):
    write(tmp_path, [[6, 6], [6]])

    def make(**options):
        return ParquetStream(tmp_path, **{"batch_size": 2, "world_size": 2, "rank": 0, **options})

    _, states, _ = run_world(make, 3, [1, 1, 1])
    new = make()
    with pytest.raises(ArgumentValueError, match=r"world_size=3.*Pass the list of every rank's state"):
        new.load_state_dict(states[0])
    with pytest.raises(ArgumentValueError, match=r"rank=1.*Pass the list of every rank's state"):
        make(world_size=3).load_state_dict(states[1])
    with pytest.raises(ArgumentValueError, match=r"got 2 states, but they were saved by a world of world_size=3"):
        new.load_state_dict(states[:2])
    with pytest.raises(ArgumentValueError, match=r"states\[0\] was saved by rank 1 .*in rank order"):
        new.load_state_dict([states[1], states[0], states[2]])
    with pytest.raises(ArgumentValueError, match=r"states\[2\] has epoch=1 .*same step"):
        new.load_state_dict(states[:2] + [{**states[2], "epoch": 1}])
    with pytest.raises(ArgumentValueError, match=r"states\[1\] must be what a ParquetStream's state_dict"):
        new.load_state_dict([states[0], {"rows": 1}, states[2]])
    with pytest.raises(ArgumentValueError, match="empty list"):
        new.load_state_dict([])
    with pytest.raises(ArgumentValueError, match="rank 2 counts 99 rows delivered in epoch 0"):
        new.load_state_dict(states[:2] + [{**states[2], "rows": 99}])
    with pytest.raises(ArgumentValueError, match=r"seed=0.*this stream has seed=4"):
        make(seed=4).load_state_dict(states)
    with pytest.raises(ArgumentValueError, match=r"batch_size=2.*this stream has batch_size=3"):
        make(batch_size=3).load_state_dict(states)
    bad = {**states[0], "reshards": [{"epoch": 0, "world_size": 2, "rows": [1]}]}
    with pytest.raises(ArgumentValueError, match="one row count per rank"):
        make(world_size=3).load_state_dict(bad)
    with pytest.raises(ArgumentValueError, match=r"states\[1\] has reshards="):
        new.load_state_dict([states[0], {**states[1], "reshards": [{"epoch": 0, "world_size": 1, "rows": [0]}]}, states[2]])
    assert new.state_dict()["rows"] == 0 and "reshards" not in new.state_dict()  # nothing was loaded


def test_a_filtered_stream_resumes_only_on_its_own_world(tmp_path):
    write(tmp_path, [[6, 6]])
    flt = ds.field("id") > 2

    def make(**world):
        return ParquetStream(tmp_path, filter=flt, **world)

    _, states, _ = run_world(make, 2, [1, 1])
    with pytest.raises(ArgumentValueError, match="a stream with a filter resumes only on the world that saved"):
        make(world_size=3, rank=0).load_state_dict(states)


def test_a_state_is_small_and_the_planner_pickles_its_history(tmp_path):
    write(tmp_path, [[50, 50], [40]])

    def make(**world):
        return ParquetStream(tmp_path, batch_size=4, equal=True, surplus="carry", shuffle=True, **world)

    _, states, _ = run_world(make, 8, [2] * 8)
    stream = make(world_size=3, rank=1)
    stream.load_state_dict(states)
    state = stream.state_dict()
    assert state["reshards"] == [{"epoch": 0, "world_size": 8, "rows": [8] * 8}]
    assert len(json.dumps(state)) < 1000
    copy = pickle.loads(pickle.dumps(stream._planner))
    assert isinstance(copy, Planner) and copy.history == stream._planner.history
    assert np.array_equal(copy.plan(3).sequence, stream._planner.plan(3).sequence)


@pytest.mark.parametrize("kind", ["parquet", "tar"])
def test_short_pieces_read_once_per_unit_are_the_pieces_read_one_by_one(tmp_path, kind, monkeypatch):
    if kind == "parquet":
        write(tmp_path, [[10, 7], [9]])
        stream, key = ParquetStream(tmp_path), "id"
    else:
        write_plain(tmp_path, [10, 7, 9])
        stream, key = TarStream(tmp_path), "cls"
    pieces = [Piece(1, 3, 4), Piece(0, 9, 10), Piece(1, 0, 2), Piece(0, 2, 3), Piece(2, 0, 9), Piece(0, 5, 6),
              Piece(2, 4, 5), Piece(1, 6, 7)]
    reader = stream._units.reader()
    reads = []
    original = reader.tables
    monkeypatch.setattr(reader, "tables", lambda pieces: reads.append(list(pieces)) or original(reads[-1]))
    try:
        one_by_one = [t.column(key).to_pylist() for p in pieces for t in original([p])]
        together = [v for t in scattered(reader.tables, pieces) for v in t.column(key).to_pylist()]
    finally:
        reader.close()
    assert together == [v for values in one_by_one for v in values]
    assert reads == [[Piece(1, 0, 4), Piece(0, 2, 10), Piece(2, 0, 9), Piece(0, 5, 6), Piece(2, 4, 5), Piece(1, 6, 7)]]
