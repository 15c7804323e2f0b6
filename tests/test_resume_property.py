"""The resume contract as a property: for random map and stream configurations, a state loaded
into a configuration that would order rows otherwise is refused with an error naming the field,
and one loaded into an equivalent configuration (any worker count where the order allows it)
resumes exactly: every row once, in order, random draws included. States are taken inside the
loop, after a ``break``, before the first batch, and with ``seed=None``; each passes through JSON."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from dataloader import ArgumentValueError, ArrayDataset, BucketSampler, DataLoader, PackedStream, ParquetStream, StreamSampler, batch_rng

ROWS = 60
BATCH = 5

configs = st.fixed_dictionaries({
    "kind": st.sampled_from(["map", "parquet", "bucket", "packed"]),
    "seed": st.sampled_from([None, 0, 1]),
    "shuffle": st.booleans(),
    "buffer": st.sampled_from([0, 7]),
    "files": st.sampled_from([1, 2]),
    "world": st.sampled_from([(1, 0), (2, 0), (2, 1)]),
    "workers": st.sampled_from([0, 2, "auto"]),
    "parallel": st.booleans(),
})



# num_workers="auto" resizes its pool after every batch (see the fixture).
pytestmark = pytest.mark.usefixtures("tuned_every_batch")


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[int, Path]:
    """The same ROWS ids in one file and in two (row groups of 10)."""
    made = {}
    for files in (1, 2):
        folder = tmp_path_factory.mktemp(f"files{files}")
        per = ROWS // files
        for number in range(files):
            ids = np.arange(number * per, (number + 1) * per, dtype=np.int64)
            pq.write_table(pa.table({"id": ids}), folder / f"part-{number}.parquet", row_group_size=10)
        made[files] = folder
    return made


def _noisy(sample):
    """A random draw per sample: seeded batches make it part of what must come out the same
    (from batch_rng(), which every kind of worker seeds: threads on a free-threaded Python)."""
    (value,) = sample if isinstance(sample, tuple) else (sample,)
    return np.float64(value) + batch_rng().random()


def _row_id(row: dict):
    """Module level: forkserver (Python 3.14's default) and spawn workers unpickle it."""
    return row["id"]


def _build(config: dict, folders: dict[int, Path], workers: int | None = None) -> DataLoader:
    workers = config["workers"] if workers is None else workers
    world_size, rank = config["world"]
    if config["kind"] == "map":
        from dataloader import RandomSampler, SequentialSampler

        dataset = ArrayDataset(np.arange(ROWS))
        kind = RandomSampler if config["shuffle"] else SequentialSampler
        extra = {"seed": config["seed"]} if config["shuffle"] else {}
        sampler = kind(dataset, batch_size=BATCH, world_size=world_size, rank=rank, **extra)
        return DataLoader(dataset, sampler, transform=_noisy, num_workers=workers, seed=config["seed"])
    if config["kind"] == "bucket":  # batches of varying size under a token budget
        dataset = ArrayDataset(np.arange(ROWS))
        lengths = np.arange(ROWS) * 7 % 23 + 1
        sampler = BucketSampler(
            dataset, lengths, max_tokens=40, shuffle=config["shuffle"], seed=config["seed"],
            world_size=world_size, rank=rank,
        )
        return DataLoader(dataset, sampler, transform=_noisy, num_workers=workers, seed=config["seed"])
    stream = ParquetStream(
        folders[config["files"]], shuffle=config["shuffle"], seed=config["seed"] or 0,
        shuffle_buffer=config["buffer"], world_size=world_size, rank=rank,
    )
    parallel = config["parallel"] and config["workers"] != 0  # then every loader of it has workers
    if config["kind"] == "packed":  # rows of 6 tokens packed from samples of 0 .. 8 tokens
        method = "best_fit" if config["shuffle"] else "concat"  # "shuffle" changes both: either is named
        packed = PackedStream(stream, 6, method=method, buffer_size=PACK_BUFFERS[config["buffer"]], seed=config["seed"],
                              transform=_tokens, world_size=world_size, rank=rank)
        return DataLoader(packed, StreamSampler(batch_size=2), num_workers=workers, parallel_stream=parallel)
    return DataLoader(
        stream, StreamSampler(batch_size=BATCH), transform=_row_id, num_workers=workers,
        parallel_stream=parallel, seed=config["seed"],
    )


PACK_BUFFERS = {0: 1, 7: 3, 3: 2}  # the packer's buffer_size for each config["buffer"]


def _tokens(row: dict) -> np.ndarray:
    """Row ``i`` as a sample of ``i % 9`` tokens ``100 i, 100 i + 1, ...``."""
    return 100 * row["id"] + np.arange(row["id"] % 9)


def _values(batch) -> list:
    if isinstance(batch, dict):  # packed rows
        return [np.asarray(batch[key]).tolist() for key in sorted(batch)]
    return np.asarray(batch).tolist()


def _two_epochs(loader: DataLoader) -> list:
    return [_values(batch) for _ in range(2) for batch in loader]


def _saved(loader: DataLoader, cut: int, how: str) -> tuple[list, dict]:
    """Epoch 0's first ``cut`` batches and a state taken ``how``: in the loop, after a break,
    or (cut 0) right after iter()."""
    loader.set_epoch(0)
    head = []
    if how == "before first":
        with iter(loader) as batches:
            state = loader.state_dict()
        return head, state
    for count, batch in enumerate(loader, 1):
        head.append(_values(batch))
        if count == cut:
            state = loader.state_dict() if how == "inside" else None
            break
    return head, state if how == "inside" else loader.state_dict()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(config=configs, cut=st.integers(1, 6), how=st.sampled_from(["inside", "after break", "before first"]),
       other_workers=st.sampled_from([0, 2, "auto"]))
def test_an_equivalent_loader_resumes_exactly(folders, config, cut, how, other_workers):
    loader = _build(config, folders)
    whole = _two_epochs(loader)
    head, state = _saved(loader, cut, how)
    state = json.loads(json.dumps(state))
    # A stream read by each worker resumes only with as many workers; anything else may differ.
    parallel = config["kind"] in ("parquet", "packed") and config["parallel"] and config["workers"] != 0
    resumed = _build(config, folders, workers=config["workers"] if parallel else other_workers)
    if config["seed"] is None and config["kind"] in ("map", "bucket"):
        assert isinstance(state["base_seed"], int)
    resumed.load_state_dict(state, skip_ahead=parallel)
    rest = [_values(batch) for _ in range(resumed.epoch, 2) for batch in resumed]
    assert head + rest == whole


# What a changed setting is named in the refusal, per kind of dataset.
CHANGES = {
    # A map dataset's loader resumes on another world (tests/test_elastic_map.py); a stream's
    # needs every rank's state, or refuses (tests/columnar/test_stream_elastic.py).
    "map": [("seed", 5, "seed"), ("shuffle", None, "")],
    "bucket": [("seed", 5, "seed"), ("shuffle", None, "shuffle")],
    "parquet": [
        ("seed", 5, "stream.seed"), ("shuffle", None, "stream.shuffle"), ("buffer", 3, "stream.shuffle_buffer"),
        ("files", None, "stream.files"), ("world", (2, 1), "stream.(world_size|rank)"),
    ],
    "packed": [  # the ParquetStream's fingerprint is the packer's "source"
        ("seed", 5, "stream.(seed|source)"), ("shuffle", None, "stream.(source|method)"), ("buffer", 3, "stream.buffer_size"),
        ("files", None, "stream.source"), ("world", (2, 1), "stream.(rank|source|world_size)"),
    ],
}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(config=configs, change=st.integers(0, 4), cut=st.integers(1, 3))
def test_a_loader_that_orders_rows_otherwise_is_refused_naming_the_field(folders, config, change, cut):
    name, value, field = CHANGES[config["kind"]][change % len(CHANGES[config["kind"]])]
    other = dict(config)
    if name == "shuffle":
        other["shuffle"] = not config["shuffle"]
    elif name == "files":
        other["files"] = 3 - config["files"]
    elif name == "world" and config["world"] == (2, 1):
        other["world"] = (2, 0)
    else:
        other[name] = value
    if config["kind"] == "map" and name == "shuffle":
        field = "sampler"  # another sampler class: the sampler's own state says so
    # A world of one's state is every rank's: a ParquetStream takes it on any world.
    assume(not (name == "world" and config["kind"] == "parquet" and config["world"][0] == 1))
    head, state = _saved(_build(config, folders, workers=0), cut, "inside")
    refusal = "on another number of ranks" if name == "world" else rf"with (\S*\.)?{field}="
    with pytest.raises(ArgumentValueError, match=refusal):
        _build(other, folders, workers=0).load_state_dict(json.loads(json.dumps(state)), skip_ahead=True)
