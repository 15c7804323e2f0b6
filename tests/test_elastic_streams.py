"""A stream's loader resumed on another number of ranks (issue 48): the list of every rank's
loader states goes to the stream, which continues what the old ranks had not delivered."""

import collections

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dataloader import DataLoader, ParquetStream, StreamSampler
from dataloader.errors import ArgumentValueError

ROWS = 300


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("elastic-streams")
    for part in range(3):
        ids = np.arange(part * 100, (part + 1) * 100)
        pq.write_table(pa.table({"id": ids}), root / f"part-{part}.parquet", row_group_size=20)
    return root


def _loader(folder, world, rank, workers=0, batch=7, parallel=False, **stream):
    options = {"shuffle": True, "seed": 1, "shuffle_buffer": 16, **stream}
    return DataLoader(
        ParquetStream(folder, world_size=world, rank=rank, **options), StreamSampler(batch_size=batch),
        num_workers=workers, parallel_stream=parallel,
    )


def _ids(batches):
    return sum((batch["id"].tolist() for batch in batches), [])


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    world=st.integers(1, 6), world_after=st.integers(1, 6), taken=st.integers(0, 4),
    equal=st.booleans(), batch=st.integers(1, 9), workers_after=st.sampled_from([0, 2]),
)
def test_every_row_comes_once_over_the_old_and_the_new_ranks(folder, world, world_after, taken, equal, batch, workers_after):
    seen, states = [], []
    olds = [_loader(folder, world, r, batch=batch, equal=equal) for r in range(world)]
    for old in olds:
        with iter(old) as batches:
            for _ in range(taken):
                seen += _ids([next(batches)])
            states.append(old.state_dict())
    for rank in range(world_after):
        new = _loader(folder, world_after, rank, workers=workers_after, batch=batch, equal=equal)
        new.load_state_dict(states)
        seen += _ids(new)
    counts = collections.Counter(seen)
    assert max(counts.values()) == 1
    if not equal:  # equal=True drops the surplus, which the stream's stats() counts
        assert len(counts) == ROWS


def test_equal_gives_every_new_rank_as_many_batches_and_a_new_worlds_state_resumes_it(folder):
    states = []
    for rank in range(4):
        old = _loader(folder, 4, rank, equal=True)
        with iter(old) as batches:
            next(batches), next(batches)
            states.append(old.state_dict())
    news = [_loader(folder, 3, rank, equal=True) for rank in range(3)]
    for new in news:
        new.load_state_dict(states)
    runs = [[batch["id"].tolist() for batch in new] for new in news]
    assert len({len(run) for run in runs}) == 1
    again = _loader(folder, 3, 1, workers=2, equal=True)
    again.load_state_dict(states)
    with iter(again) as batches:
        head = [next(batches)["id"].tolist()]
        midway = again.state_dict()
    resumed = _loader(folder, 3, 1, equal=True)
    resumed.load_state_dict(midway)
    assert head + [batch["id"].tolist() for batch in resumed] == runs[1]


def test_one_ranks_stream_state_and_parallel_streams_are_refused_naming_the_fix(folder):
    states = []
    for rank in range(2):
        old = _loader(folder, 2, rank)
        with iter(old) as batches:
            next(batches)
            states.append(old.state_dict())
    with pytest.raises(ArgumentValueError, match="Pass the list of every rank's DataLoader state"):
        _loader(folder, 3, 0).load_state_dict(states[0])
    parallel = []
    for rank in range(2):
        old = _loader(folder, 2, rank, workers=2, parallel=True)
        with iter(old) as batches:
            next(batches)
            parallel.append(old.state_dict())
        old.close()
    with pytest.raises(ArgumentValueError, match="parallel_stream=False"):
        _loader(folder, 3, 0, workers=2, parallel=True).load_state_dict(parallel)


def test_fixed_size_epochs_of_a_stream_carry_on_over_the_new_world(folder):
    def loader(world, rank, epoch_size=20):
        stream = ParquetStream(folder, shuffle=True, seed=2, world_size=world, rank=rank)
        return DataLoader(stream, StreamSampler(batch_size=10), epoch_size=epoch_size)

    seen, states = [], []
    for rank in range(2):
        old = loader(2, rank)
        with iter(old) as batches:
            seen += _ids([next(batches), next(batches)])
            states.append(old.state_dict())
    for rank in range(3):
        new = loader(3, rank)
        new.load_state_dict(states)
        got = [batch["id"].tolist() for batch in new]  # the fixed-size epoch's 18 batches left
        assert len(got) == 18
        # The stream's pass runs out inside them; the rest is its next pass on the new world.
        plain = DataLoader(ParquetStream(folder, shuffle=True, seed=2, world_size=3, rank=rank), StreamSampler(batch_size=10))
        plain.set_epoch(1)
        following = [batch["id"].tolist() for batch in plain]
        cut = next(k for k in range(len(got) + 1) if got[k:] == following[: len(got) - k])
        seen += sum(got[:cut], [])
    assert sorted(seen) == list(range(ROWS))  # the pass: every row once over both worlds
