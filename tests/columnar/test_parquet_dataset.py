"""ParquetDataset: rows equal the files' rows, batches equal collated rows, the cache is bounded."""

from __future__ import annotations

import pickle
import tempfile
import threading
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataloader import DataLoader, RandomSampler, SequentialSampler
from dataloader.columnar import ParquetDataset
from dataloader.errors import ArgumentTypeError, ArgumentValueError, DataLoaderError
from tests.columnar._mapping import TellsIfMapped, is_mapped, needs_maps
from tests.columnar._tables import (
    sample_table,
    PARQUET_KINDS,
    assert_bulk_matches_rows,
    cut_table,
    expected_rows,
    has_unfilled_nulls,
    layouts,
    python_row,
    tables,
    write_parquet,
)
from tests.harness import assert_same_batches, collect

FAST = settings(max_examples=40, deadline=None)


@FAST
@given(data=st.data(), cache=st.integers(1, 3))
def test_rows_are_the_files_rows_and_a_batch_is_its_rows_collated(data, cache):
    table, fill = data.draw(tables(PARQUET_KINDS))
    layout = data.draw(layouts(table.num_rows))
    with tempfile.TemporaryDirectory() as directory:
        paths = write_parquet(Path(directory), cut_table(table, layout))
        unfilled = has_unfilled_nulls(table, fill)
        if unfilled:
            with pytest.raises(DataLoaderError, match=f"column '{unfilled[0]}' has .* null value"):
                ParquetDataset(paths, fill_null=fill)
            return
        dataset = ParquetDataset(directory, fill_null=fill, cache_row_groups=cache)
        want = expected_rows(table, fill)
        assert len(dataset) == len(want)
        assert [python_row(dataset[i]) for i in range(len(dataset))] == want
        indices = data.draw(st.lists(st.integers(-len(want), len(want) - 1), max_size=12)) if want else []
        assert_bulk_matches_rows(dataset, indices)


def _table(rows: int = 40) -> pa.Table:
    return sample_table(rows, blob=False)


def _files(directory: Path, rows: int = 40, groups: int = 5) -> list[str]:
    """Two files of row groups of ``groups`` rows (the last may be shorter)."""
    table, half = _table(rows), rows // 2
    cut = lambda t: [t.slice(i, groups) for i in range(0, t.num_rows, groups)]  # noqa: E731
    return write_parquet(directory, [cut(table.slice(0, half)), cut(table.slice(half))])


@pytest.mark.parametrize("workers,context", [(0, None), (2, "fork"), (2, "spawn")])
def test_a_loader_gives_the_batches_a_plain_read_gives(tmp_path, workers, context):
    dataset = ParquetDataset(_files(tmp_path))
    sampler = RandomSampler(dataset, batch_size=8, seed=3)
    sampler.set_epoch(0)
    plain = [dataset.__getitems__(indices).batch for indices in sampler]
    sampler.set_epoch(0)
    loader = DataLoader(dataset, sampler, num_workers=workers, multiprocessing_context=context)
    assert_same_batches(collect(loader), collect(plain))


class _Reads:
    """Records ParquetFile.read_row_group calls; fails any read of more than one row group."""

    def __init__(self, monkeypatch):
        self.calls: list[int] = []
        original = pq.ParquetFile.read_row_group
        reads = self

        def counting(file, index, *args, **kwargs):
            reads.calls.append(index)
            return original(file, index, *args, **kwargs)

        monkeypatch.setattr(pq.ParquetFile, "read_row_group", counting)
        for name in ("read", "read_row_groups", "iter_batches"):
            monkeypatch.setattr(pq.ParquetFile, name, _no_bulk_read)


def _no_bulk_read(*args, **kwargs):
    raise AssertionError("ParquetDataset read more than one row group at a time")


def test_building_reads_no_data_and_a_batch_decodes_each_group_once(tmp_path, monkeypatch):
    paths = _files(tmp_path)  # 8 row groups of 5 rows
    reads = _Reads(monkeypatch)
    dataset = ParquetDataset(paths)
    assert reads.calls == [] and len(dataset) == 40
    batch = dataset.__getitems__([11, 3, 12, 4, 39, 10]).batch
    assert batch["id"].tolist() == [11, 3, 12, 4, 39, 10]
    assert len(reads.calls) == 3  # groups 0, 2 and 7, in any order of the batch
    dataset.__getitems__([13, 14, 0])
    assert len(reads.calls) == 3  # all cached


def test_the_cache_holds_at_most_cache_row_groups_groups(tmp_path, monkeypatch):
    paths = _files(tmp_path)
    reads = _Reads(monkeypatch)
    dataset = ParquetDataset(paths, cache_row_groups=2)
    for row in range(0, 40, 5):  # every group once: 8 reads
        dataset[row]
        assert len(dataset._cache) <= 2
    assert len(reads.calls) == 8
    dataset[35]  # group 7: most recent, cached
    dataset[30]  # group 6: cached
    assert len(reads.calls) == 8
    dataset[0]  # group 0 was dropped long ago
    assert len(reads.calls) == 9 and len(dataset._cache) == 2
    dataset.__getitems__(list(range(0, 40, 5)))  # a batch needing 8 groups reads each once
    assert len(reads.calls) == 9 + 7 and len(dataset._cache) == 2


def test_threads_share_the_cache_and_read_the_right_rows(tmp_path):
    dataset = ParquetDataset(_files(tmp_path, rows=200, groups=7), cache_row_groups=3)
    errors = []

    def read(seed):
        rng = np.random.default_rng(seed)
        for _ in range(30):
            indices = rng.integers(0, 200, 9).tolist()
            if dataset.__getitems__(indices).batch["id"].tolist() != indices:
                errors.append(indices)

    threads = [threading.Thread(target=read, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors


def test_pickling_leaves_the_cache_behind(tmp_path):
    dataset = ParquetDataset(_files(tmp_path), columns=["name", "id"])
    dataset.__getitems__([0, 39])
    copy = pickle.loads(pickle.dumps(dataset))
    assert len(copy._cache) == 0 and copy.columns == ["name", "id"]
    assert [python_row(copy[i]) for i in range(40)] == [python_row(dataset[i]) for i in range(40)]


def test_a_filesystem_and_a_directory_resolve_the_files(tmp_path):
    _files(tmp_path)
    filesystem = pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem())
    dataset = ParquetDataset("", filesystem=filesystem)
    assert len(dataset) == 40 and python_row(dataset[33]) == _table().slice(33, 1).to_pylist()[0]


def test_images_as_encoded_bytes_come_out_as_bytes(tmp_path):
    image = pytest.importorskip("PIL.Image")
    import io

    pixels = np.arange(48, dtype=np.uint8).reshape(4, 4, 3)
    encoded = io.BytesIO()
    image.fromarray(pixels).save(encoded, format="PNG")
    pq.write_table(pa.table({"image": [encoded.getvalue()] * 3, "label": [0, 1, 2]}), tmp_path / "images.parquet")
    dataset = ParquetDataset(tmp_path / "images.parquet")
    row = dataset[2]
    assert isinstance(row["image"], bytes) and row["label"] == 2
    np.testing.assert_array_equal(np.asarray(image.open(io.BytesIO(row["image"]))), pixels)
    loader = DataLoader(dataset, SequentialSampler(dataset, batch_size=3), num_workers=2)
    batch = next(iter(loader))
    assert [bytes(b) for b in batch["image"]] == [encoded.getvalue()] * 3


@needs_maps
def test_local_files_are_read_memory_mapped_in_worker_processes_only(tmp_path):
    path = tmp_path / "numbers.parquet"
    pq.write_table(pa.table({"x": list(range(10))}), path)
    dataset = ParquetDataset(path)
    assert int(dataset[3]["x"]) == 3
    assert not is_mapped(path)  # the main process copies
    loader = DataLoader(dataset, SequentialSampler(dataset, batch_size=5), num_workers=2,
                        transform=TellsIfMapped(path), worker_type="process")
    batches = list(loader)
    assert [int(x) for b in batches for x in b["x"]] == list(range(10))
    assert all(all(b["mapped"]) for b in batches)  # each worker maps its own copy


def test_nulls_are_an_error_naming_the_column_when_built_or_when_read(tmp_path):
    table = pa.table({"a": [1, 2, 3], "b": pa.array([1.0, None, 3.0])})
    pq.write_table(table, tmp_path / "stats.parquet")
    with pytest.raises(DataLoaderError, match=r"column 'b' has 1 null value\(s\).*fill_null=\{'b': value\}"):
        ParquetDataset(tmp_path / "stats.parquet")
    assert ParquetDataset(tmp_path / "stats.parquet", fill_null={"b": -1.0})[1]["b"] == -1.0
    # Without statistics the footer cannot tell: the error comes with the row group that holds it.
    pq.write_table(table, tmp_path / "bare.parquet", write_statistics=False)
    dataset = ParquetDataset(tmp_path / "bare.parquet")
    with pytest.raises(DataLoaderError, match=r"column 'b' has 1 null value\(s\) in this batch"):
        dataset[0]


@pytest.mark.parametrize("kwargs,error,message", [
    ({"columns": "a"}, ArgumentTypeError, "`columns` must be a list of column names; got 'a'"),
    ({"columns": ["a", "z"]}, ArgumentValueError, "`columns` names 'z', which is not a column of the files"),
    ({"cache_row_groups": 0}, ArgumentValueError, "`cache_row_groups` must be a positive integer; got 0"),
    ({"strings": "x"}, ArgumentValueError, "`strings` must be one of"),
    ({"fill_null": {"z": 1}}, ArgumentValueError, "`fill_null` names 'z'"),
])
def test_bad_arguments_are_clear_errors(tmp_path, kwargs, error, message):
    pq.write_table(pa.table({"a": [1, 2]}), tmp_path / "a.parquet")
    with pytest.raises(error, match=message):
        ParquetDataset(tmp_path / "a.parquet", **kwargs)


def test_bad_files_are_clear_errors(tmp_path):
    (tmp_path / "bad.parquet").write_bytes(b"not parquet")
    with pytest.raises(ArgumentValueError, match="cannot read .*bad.parquet.* as Parquet"):
        ParquetDataset(tmp_path / "bad.parquet")
    pq.write_table(pa.table({"a": [1]}), tmp_path / "one.parquet")
    pq.write_table(pa.table({"a": ["x"]}), tmp_path / "two.parquet")
    with pytest.raises(ArgumentValueError, match="every file given to ParquetDataset needs the same columns"):
        ParquetDataset([tmp_path / "one.parquet", tmp_path / "two.parquet"])
    with pytest.raises(IndexError, match="out of range for ParquetDataset of length 1"):
        ParquetDataset(tmp_path / "one.parquet")[1]


def test_a_fixed_shape_tensor_column_comes_out_n_dimensional(tmp_path):
    tensor = pa.fixed_shape_tensor(pa.float32(), (2, 3))
    storage = pa.FixedSizeListArray.from_arrays(pa.array(np.arange(24, dtype=np.float32)), 6)
    pq.write_table(pa.table({"t": pa.ExtensionArray.from_storage(tensor, storage)}), tmp_path / "t.parquet", row_group_size=2)
    dataset = ParquetDataset(tmp_path / "t.parquet")
    assert dataset[1]["t"].shape == (2, 3) and dataset[1]["t"][1, 2] == 11
    assert dataset.__getitems__([3, 0]).batch["t"].shape == (2, 2, 3)
    assert_bulk_matches_rows(dataset, [3, 0, 2])
