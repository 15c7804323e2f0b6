"""MixedStream over random layouts: every row of every source once per epoch across ranks x
workers, and a resume at a random point in a random shard gives the uninterrupted run."""

from __future__ import annotations

import json
import pickle
import tempfile
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dataloader import ArrayDataset, MixedStream, ParquetStream, write_parquet_shards
from tests.test_mixing import as_worker, ident

# Each source: ("map", rows) or ("parquet", rows, rows per shard, rows per row group).
sources = st.lists(
    st.one_of(st.tuples(st.just("map"), st.integers(0, 30)),
              st.tuples(st.just("parquet"), st.integers(1, 40), st.integers(1, 15), st.integers(1, 6))),
    min_size=1, max_size=3)


@settings(max_examples=25, deadline=None)
@given(layout=sources, weights=st.lists(st.floats(0.1, 5.0), min_size=3, max_size=3),
       world=st.integers(1, 4), workers=st.integers(0, 3), epoch=st.integers(0, 1),
       stop=st.sampled_from(["all_exhausted", "first_exhausted"]), cut=st.integers(0, 150), where=st.integers(0, 15))
def test_every_row_once_and_resume_anywhere(layout, weights, world, workers, epoch, stop, cut, where):
    with tempfile.TemporaryDirectory() as folder:
        ids: list[list[int]] = []
        for number, spec in enumerate(layout):
            first = 1000 * number
            ids.append(list(range(first, first + spec[1])))
            if spec[0] == "parquet":
                write_parquet_shards({"id": np.arange(first, first + spec[1])}, Path(folder) / str(number),
                                     spec[2], row_group_size=spec[3])

        def make(rank: int) -> MixedStream:
            made = [ArrayDataset(np.array(ids[n], dtype=np.int64)) if spec[0] == "map" else
                    ParquetStream(Path(folder) / str(n), shuffle=True, seed=n, world_size=world, rank=rank)
                    for n, spec in enumerate(layout)]
            mix = MixedStream(made, weights[: len(made)], stop=stop, seed=9, world_size=world, rank=rank)
            mix.set_epoch(epoch)
            return mix

        shards = {}
        for rank in range(world):
            mix = make(rank)
            for worker in range(max(workers, 1)):
                with as_worker(worker, workers):
                    shards[rank, worker] = [ident(item) for item in mix]
        delivered = sorted(i for read in shards.values() for i in read)
        if stop == "all_exhausted":
            assert delivered == sorted(i for source in ids for i in source)
        else:  # each row at most once
            assert len(delivered) == len(set(delivered)) and set(delivered) <= {i for s in ids for i in s}

        rank, worker = list(shards)[where % len(shards)]
        full = shards[rank, worker]
        with as_worker(worker, workers):
            first = make(rank)
            items = iter(first)
            head = [ident(next(items)) for _ in range(min(cut, len(full)))]
            state = json.loads(json.dumps(first.state_dict()))
            resumed = pickle.loads(pickle.dumps(make(rank)))
            resumed.load_state_dict(state)
            assert head + [ident(item) for item in resumed] == full
