"""ParquetStream and ArrowStream end to end: exactly once per epoch over ranks x workers, and the options."""

from __future__ import annotations

import collections
import faulthandler
import gc
import pickle
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataloader import DataLoader, StreamSampler
from dataloader.transform import Transform
from dataloader.columnar import ArrowStream, ParquetStream, StreamStats
from dataloader.errors import ArgumentTypeError, ArgumentValueError, DataLoaderError, WorkerDiedError
from tests.columnar._mapping import TellsIfMapped, is_mapped, needs_maps
from tests.harness import as_worker, check_loader_resumes, collect

FAST = settings(max_examples=60, deadline=None)

# Files, each a list of row-group (record batch) sizes.
layouts = st.lists(st.lists(st.integers(0, 25), min_size=1, max_size=4), min_size=1, max_size=3)


def table(first: int, rows: int) -> pa.Table:
    ids = np.arange(first, first + rows, dtype=np.int64)
    return pa.table({
        "id": ids,
        "x": ids * 0.5,
        "s": pa.array([f"r{i}" for i in ids], pa.string()),
        "v": pa.FixedSizeListArray.from_arrays(pa.array(np.repeat(ids, 2)), 2),
    })


def write(directory: Path, layout: list[list[int]], kind: str = "parquet") -> int:
    """Files ``part-<k>`` with one unit per size in ``layout``, ids 0..rows-1 in order; the rows."""
    first = 0
    for number, sizes in enumerate(layout):
        path = directory / f"part-{number:02d}.{'parquet' if kind == 'parquet' else 'arrow'}"
        schema = table(0, 0).schema
        if kind == "parquet":
            with pq.ParquetWriter(path, schema) as writer:
                for size in sizes:
                    writer.write_table(table(first, size), row_group_size=max(size, 1))
                    first += size
        else:
            with pa.ipc.new_file(path, schema) as writer:
                for size in sizes:
                    writer.write_batch(table(first, size).combine_chunks().to_batches()[0] if size else
                                       pa.RecordBatch.from_pylist([], schema=schema))
                    first += size
    return first




def read_epoch(make, world: int, workers: int, epoch: int = 0) -> dict[tuple[int, int], list]:
    """(rank, worker) -> what that shard yields in ``epoch``."""
    out = {}
    for rank in range(world):
        stream = make(world_size=world, rank=rank)
        stream.set_epoch(epoch)
        for worker in range(max(workers, 1)):
            with as_worker(worker, workers):
                out[rank, worker] = list(stream)
    return out


def ids(items: list) -> list[int]:
    """The ids of rows or of Collated batches, in order."""
    found = []
    for item in items:
        found += [int(i) for i in (item.batch["id"] if hasattr(item, "batch") else [item["id"]])]
    return found


@FAST
@given(layout=layouts, world=st.integers(1, 4), workers=st.integers(0, 3),
       batch_size=st.one_of(st.none(), st.integers(1, 7)), shuffle=st.booleans(),
       shuffle_buffer=st.sampled_from([0, 1, 5, 13]), kind=st.sampled_from(["parquet", "arrow"]))
def test_every_row_exactly_once_per_epoch(layout, world, workers, batch_size, shuffle, shuffle_buffer, kind):
    with tempfile.TemporaryDirectory() as directory:
        rows = write(Path(directory), layout, kind)
        cls = ParquetStream if kind == "parquet" else ArrowStream

        def make(**world_kwargs):
            return cls(directory, batch_size=batch_size, shuffle=shuffle, shuffle_buffer=shuffle_buffer, seed=5,
                       **world_kwargs)

        for epoch in (0, 1):
            shards = read_epoch(make, world, workers, epoch)
            delivered = [i for items in shards.values() for i in ids(items)]
            assert sorted(delivered) == list(range(rows))
            if batch_size is not None:  # only the epoch's last batch is short
                sizes = [b.size for items in shards.values() for b in items]
                assert sum(size < batch_size for size in sizes) <= 1


def test_shuffle_changes_the_order_between_epochs_and_seed_fixes_it(tmp_path):
    rows = write(tmp_path, [[7, 5, 9, 3, 8], [6, 4, 10]])
    first = ParquetStream(tmp_path, shuffle=True, seed=11)
    orders = [ids(list(first)) for _ in range(3)]  # without set_epoch each iter() is the next epoch
    assert all(sorted(order) == list(range(rows)) for order in orders)
    assert len({tuple(order) for order in orders}) == 3
    again = ParquetStream(tmp_path, shuffle=True, seed=11)
    again.set_epoch(1)
    assert ids(list(again)) == orders[1] == ids(list(again))  # set_epoch holds until changed
    other = ParquetStream(tmp_path, shuffle=True, seed=12)
    assert ids(list(other)) != orders[0]
    buffered = [ids(list(ParquetStream(tmp_path, shuffle_buffer=8, seed=s))) for s in (1, 1, 2)]
    assert buffered[0] == buffered[1] != buffered[2] and sorted(buffered[2]) == list(range(rows))


@FAST
@given(layout=layouts, world=st.integers(1, 4), workers=st.integers(0, 3), batch_size=st.integers(1, 6),
       shuffle=st.booleans())
def test_equal_gives_every_rank_the_same_batches(layout, world, workers, batch_size, shuffle):
    with tempfile.TemporaryDirectory() as directory:
        rows = write(Path(directory), layout)
        if rows < world * batch_size:
            with pytest.raises(ArgumentValueError, match="fewer than world_size"):
                ParquetStream(directory, batch_size=batch_size, equal=True, world_size=world, rank=0)
            return
        for surplus in ("drop", "carry"):
            def make(**world_kwargs):
                return ParquetStream(directory, batch_size=batch_size, shuffle=shuffle, equal=True, surplus=surplus,
                                     **world_kwargs)

            delivered: collections.Counter = collections.Counter()
            for epoch in (0, 1):
                shards = read_epoch(make, world, workers, epoch)
                planned = make(world_size=world, rank=0)
                planned.set_epoch(epoch)
                stats = planned.stats()  # the epoch's figures, before reading
                total = rows + stats.carried_in
                per_rank = {sum(len(shards[r, w]) for w in range(max(workers, 1))) for r in range(world)}
                assert per_rank == {total // batch_size // world}
                assert all(b.size == batch_size for items in shards.values() for b in items)
                got = [i for items in shards.values() for i in ids(items)]
                assert stats.dropped + stats.carried == total - len(got)
                assert (stats.carried if surplus == "carry" else stats.dropped) < world * batch_size
                delivered.update(got)
            if surplus == "carry":  # over two epochs nothing is lost
                assert set(delivered) == set(range(rows))


def test_stats_count_delivered_dropped_and_carried(tmp_path):
    write(tmp_path, [[10, 10, 10]])
    stream = ParquetStream(tmp_path, batch_size=4, equal=True, world_size=2, rank=1)
    assert sum(b.size for b in stream) == 12
    assert stream.stats() == StreamStats(0, 12, 12, 6, 0, 0)
    carry = ParquetStream(tmp_path, batch_size=4, equal=True, world_size=2, rank=0, surplus="carry")
    first = ids(list(carry))
    assert carry.stats() == StreamStats(0, 12, 12, 0, 6, 0)
    second = ids(list(carry))
    assert second[:6] == [24, 25, 26, 27, 28, 29]  # the carried rows come first
    assert carry.stats().carried_in == 6 and first[:4] == [0, 1, 2, 3]


def test_filter_keeps_exactly_the_matching_rows_and_columns_project(tmp_path):
    rows = write(tmp_path, [[9, 14, 5], [11]])
    keep = ds.field("x") > 7.0  # ids above 14
    for cls, kind in ((ParquetStream, "parquet"), (ArrowStream, "arrow")):
        directory = tmp_path / kind
        directory.mkdir()
        write(directory, [[9, 14, 5], [11]], kind)
        for batch_size in (None, 4):
            def make(**world_kwargs):
                return cls(directory, batch_size=batch_size, columns=["id"], filter=keep, **world_kwargs)

            for world, workers in ((1, 0), (2, 3)):  # whole units; pieces cut inside units
                shards = read_epoch(make, world, workers)
                assert sorted(i for items in shards.values() for i in ids(items)) == list(range(15, rows))
                items = [item for items in shards.values() for item in items]
                keys = {key for item in items for key in (item.batch if batch_size else item)}
                assert keys == {"id"}  # "x" was read for the filter only


def test_filesystems_and_uris(tmp_path):
    write(tmp_path, [[4, 3]])
    write(tmp_path, [[2, 5]], "arrow")
    subtree = pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem())
    for stream in (
        ParquetStream("part-00.parquet", filesystem=subtree, batch_size=2),
        ParquetStream(tmp_path.as_uri() + "/part-00.parquet", batch_size=2),
        ArrowStream(["part-00.arrow"], filesystem=subtree, batch_size=2),  # not memory-mapped
    ):
        copy = pickle.loads(pickle.dumps(stream))
        assert ids(list(copy)) == ids(list(stream)) == list(range(7))


def test_batched_and_row_modes_agree(tmp_path):
    write(tmp_path, [[9, 14, 5], [11, 2]])
    rows = list(ParquetStream(tmp_path, shuffle=True, shuffle_buffer=6, seed=3))
    batches = list(ParquetStream(tmp_path, batch_size=5, shuffle=True, shuffle_buffer=6, seed=3))
    from_batches = [row for batch in batches for row in batch.rows()]
    assert len(rows) == len(from_batches) == 41
    for mine, theirs in zip(rows, from_batches):
        assert mine.keys() == theirs.keys() == {"id", "x", "s", "v"}
        for key in mine:
            np.testing.assert_array_equal(mine[key], theirs[key])
    assert batches[0].batch["v"].shape == (5, 2) and batches[0].batch["s"].dtype == object


class AddOne(Transform):
    def apply(self, sample):
        return {**sample, "x": sample["x"] + 1}


@pytest.mark.parametrize("workers", [1, 2, 3])
@pytest.mark.parametrize("world", [1, 3])
def test_loader_workers_read_every_row_once(tmp_path, workers, world):
    rows = write(tmp_path, [[13, 4], [20, 1, 9]])
    delivered = []
    for rank in range(world):
        stream = ParquetStream(tmp_path, batch_size=4, shuffle=True, world_size=world, rank=rank)
        loader = DataLoader(stream, StreamSampler(), num_workers=workers, parallel_stream=True,
                            multiprocessing_context="fork")
        delivered += [int(i) for batch in loader for i in batch["id"]]
    assert sorted(delivered) == list(range(rows))


def test_thread_workers_share_one_stream_object(tmp_path):
    rows = write(tmp_path, [[13, 4], [20, 1, 9]])
    stream = ParquetStream(tmp_path, batch_size=4, shuffle=True)
    loader = DataLoader(stream, StreamSampler(), num_workers=3, parallel_stream=True, worker_type="thread")
    for _ in range(2):
        assert sorted(int(i) for batch in loader for i in batch["id"]) == list(range(rows))


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_two_workers_end_to_end(no_leaks, tmp_path, method):
    rows = write(tmp_path, [[30, 25], [40]])
    stream = ParquetStream(tmp_path, batch_size=8, shuffle=True, shuffle_buffer=16)
    loader = DataLoader(stream, StreamSampler(), num_workers=2, parallel_stream=True, multiprocessing_context=method)
    epochs = [collect(loader) for _ in range(2)]
    for batches in epochs:
        assert sorted(int(i) for b in batches for i in b["id"]) == list(range(rows))
        assert all(isinstance(b["x"], np.ndarray) and b["v"].shape[1:] == (2,) for b in batches)
    assert [int(i) for b in epochs[0] for i in b["id"]] != [int(i) for b in epochs[1] for i in b["id"]]
    # A per-sample transform: the main process reads, workers get the batches' rows.
    loader = DataLoader(stream, StreamSampler(), transform=AddOne(), num_workers=2, multiprocessing_context=method)
    batches = collect(loader)
    assert sorted(int(i) for b in batches for i in b["id"]) == list(range(rows))
    assert all(np.array_equal(b["x"], b["id"] * 0.5 + 1) for b in batches)


def test_pickles_and_reads_the_same(tmp_path):
    write(tmp_path, [[5, 6]], "arrow")
    stream = ArrowStream(tmp_path, batch_size=3, shuffle=True)
    copy = pickle.loads(pickle.dumps(stream))
    assert ids(list(copy)) == ids(list(stream))


def test_strings_as_arrow_and_nulls(tmp_path):
    write(tmp_path, [[3, 4]])
    batches = list(ParquetStream(tmp_path, batch_size=5, strings="arrow", columns=["s"]))
    assert isinstance(batches[0].batch["s"], pa.Array)
    assert batches[0].batch["s"].to_pylist() == ["r0", "r1", "r2", "r3", "r4"]  # across row groups
    pq.write_table(pa.table({"id": pa.array([1, None, 3])}), tmp_path / "nulls.parquet")
    with pytest.raises(DataLoaderError, match="null"):
        list(ParquetStream(tmp_path / "nulls.parquet"))
    assert [row["id"] for row in ParquetStream(tmp_path / "nulls.parquet", fill_null=0)] == [1, 0, 3]


def test_errors_name_the_cause_and_the_fix(tmp_path):
    write(tmp_path, [[5]])
    path = tmp_path / "part-00.parquet"
    cases = [
        (dict(batch_size=0), ArgumentValueError, "batch_size"),
        (dict(columns="id"), ArgumentTypeError, "list of column names"),
        (dict(columns=["nope"]), ArgumentValueError, "distinct columns of the files"),
        (dict(columns=[]), ArgumentValueError, "at least one column"),
        (dict(filter="x > 1"), ArgumentTypeError, "pyarrow.dataset expression"),
        (dict(filter=ds.field("nope") > 1), ArgumentValueError, "does not apply"),
        (dict(filter=ds.field("x") > 1, equal=True, batch_size=1), ArgumentValueError, "filter's matches"),
        (dict(equal=True, batch_size=4, world_size=2, rank=0), ArgumentValueError, "fewer than world_size"),
        (dict(surplus="carry"), ArgumentValueError, "applies only with equal=True"),
        (dict(surplus="keep", equal=True), ArgumentValueError, "surplus"),
        (dict(strings="str"), ArgumentValueError, "strings"),
        (dict(rank=1), ArgumentValueError, "without `world_size`"),
    ]
    for kwargs, error, words in cases:
        with pytest.raises(error, match=words):
            ParquetStream(path, **kwargs)
    (tmp_path / "bad.parquet").write_bytes(b"not parquet")
    with pytest.raises(ArgumentValueError, match="as Parquet"):
        ParquetStream(tmp_path / "bad.parquet")
    with pa.ipc.new_stream(tmp_path / "stream.arrow", table(0, 1).schema) as writer:
        writer.write_table(table(0, 1))
    with pytest.raises(ArgumentValueError, match="IPC file format"):
        ArrowStream(tmp_path / "stream.arrow")
    pq.write_table(pa.table({"id": [1.5]}), tmp_path / "other.parquet")
    with pytest.raises(ArgumentValueError, match="same columns and types"):
        ParquetStream([path, tmp_path / "other.parquet"])
    pq.write_table(pa.table({"id": pa.array([7], pa.int64()), "extra": [1]}), tmp_path / "wider.parquet")
    assert [r["id"] for r in ParquetStream([path, tmp_path / "wider.parquet"], columns=["id"])] == [0, 1, 2, 3, 4, 7]


@FAST
@given(layout=layouts, batch_size=st.integers(1, 6), batched=st.booleans(), shuffle=st.booleans(),
       shuffle_buffer=st.sampled_from([0, 7]), filtered=st.booleans(), kind=st.sampled_from(["parquet", "arrow"]),
       cut=st.integers(0, 200))
def test_a_loader_resumes_a_stream_exactly_where_its_state_was_taken(
    layout, batch_size, batched, shuffle, shuffle_buffer, filtered, kind, cut
):
    """The stream's state_dict (rows of this shard delivered) lets a loader resume mid-epoch: the
    rows before the state and the rows after it are the uninterrupted epochs' rows, in order,
    whether the stream seeks (no filter, no shuffle buffer) or re-reads and drops rows."""
    with tempfile.TemporaryDirectory() as folder:
        rows = write(Path(folder), layout, kind)
        if rows == 0:
            return
        stream_type = ParquetStream if kind == "parquet" else ArrowStream
        options = dict(shuffle=shuffle, seed=3, shuffle_buffer=shuffle_buffer,
                       filter=(ds.field("x") > 2.0) if filtered else None)

        def loader() -> DataLoader:
            if batched:
                return DataLoader(stream_type(folder, batch_size=batch_size, **options), StreamSampler())
            return DataLoader(stream_type(folder, **options), StreamSampler(batch_size))

        check_loader_resumes(loader, "id", cut)


@needs_maps
def test_local_parquet_is_read_memory_mapped_in_worker_processes_only(tmp_path, monkeypatch):
    write(tmp_path, [[6, 6]])
    path = str(tmp_path / "part-00.parquet")
    rows = iter(ParquetStream(path))
    assert next(rows)["id"] == 0 and not is_mapped(path)  # the main process copies
    rows.close()
    loader = DataLoader(ParquetStream(path), StreamSampler(batch_size=4), num_workers=1,
                        parallel_stream=True, transform=TellsIfMapped(path), worker_type="process")
    batches = list(loader)
    assert sum(len(b["id"]) for b in batches) == 12 and all(all(b["mapped"]) for b in batches)
    # As a worker process reads: mapped while its epoch reads, unmapped when the epoch ends.
    monkeypatch.setattr("dataloader._local._worker_process", True)
    rows = iter(ParquetStream(path))
    first = next(rows)
    assert first["id"] == 0 and is_mapped(path)
    del first  # its columns may be views of the mapped file
    rows.close()
    gc.collect()  # whatever still refers to the file in a cycle goes now, whenever the collector last ran
    assert not is_mapped(path)


def _no_crash_dump(worker_id: int) -> None:
    faulthandler.disable()  # the crash is the point: no fatal-error dump in the test's log


@pytest.mark.timeout(60)
def test_a_parquet_file_truncated_under_a_worker_is_a_reported_death(tmp_path, no_leaks):
    path = tmp_path / "numbers.parquet"
    pq.write_table(pa.table({"x": np.arange(400_000)}), path, row_group_size=20_000, compression="none")
    loader = DataLoader(ParquetStream(path, batch_size=10_000), StreamSampler(), num_workers=1,
                        parallel_stream=True, prefetch_factor=1, worker_init_fn=_no_crash_dump,
                        worker_type="process")  # a crash a process survives: processes on 3.14t too
    with iter(loader) as batches:
        assert len(next(batches)["x"]) == 10_000
        with open(path, "r+b") as file:  # rewritten in place while the worker has it mapped
            file.truncate(1000)
        with pytest.raises(WorkerDiedError, match="SIGBUS") as raised:
            for _ in batches:
                pass
    assert "truncated or rewritten while it was read" in str(raised.value)


def test_rows_converted_in_small_pieces_are_the_rows_read_whole(tmp_path, monkeypatch):
    write(tmp_path, [[40, 25], [33]])
    whole = [list(ParquetStream(tmp_path, batch_size=size)) for size in (None, 7)]
    monkeypatch.setattr("dataloader.columnar._batching.PIECE_BYTES", 100)  # a few rows a piece
    pieces = [list(ParquetStream(tmp_path, batch_size=size)) for size in (None, 7)]
    assert ids(pieces[0]) == ids(whole[0]) == ids(pieces[1]) == list(range(98))
    assert [row["s"] for row in pieces[0]] == [row["s"] for row in whole[0]]
    for got, expected in zip(pieces[1], whole[1]):
        assert got.size == expected.size
        assert all(np.array_equal(got.batch[k], expected.batch[k]) for k in expected.batch)
