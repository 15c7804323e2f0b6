"""ArrowDataset: rows equal the table's, batches equal collated rows, over tables and IPC files."""

from __future__ import annotations

import io
import pickle
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.fs as pafs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataloader import DataLoader, RandomSampler, SequentialSampler
from dataloader.columnar import ArrowDataset
from dataloader.errors import ArgumentTypeError, ArgumentValueError, DataLoaderError
from dataloader.transform import Transform
from tests.columnar._tables import (
    sample_table,
    assert_bulk_matches_rows,
    cut_table,
    expected_rows,
    has_unfilled_nulls,
    layouts,
    python_row,
    tables,
    write_arrow,
)
from tests.harness import assert_same_batches, collect

FAST = settings(max_examples=40, deadline=None)


def source_of(kind: str, table: pa.Table, layout: list[list[int]], directory: Path):
    """``table`` as an in-memory table of several chunks, or as IPC files (plain or compressed)."""
    files = cut_table(table, layout)
    if kind == "table":
        pieces = [piece for pieces in files for piece in pieces]
        return pa.concat_tables(pieces) if pieces else table
    return write_arrow(directory, files, compression="lz4" if kind == "compressed" else None)


@pytest.mark.parametrize("kind", ["table", "files", "compressed"])
@FAST
@given(data=st.data())
def test_rows_are_the_tables_rows_and_a_batch_is_its_rows_collated(kind, data):
    table, fill = data.draw(tables())
    layout = data.draw(layouts(table.num_rows))
    with tempfile.TemporaryDirectory() as directory:
        source = source_of(kind, table, layout, Path(directory))
        unfilled = has_unfilled_nulls(table, fill)
        if unfilled:
            with pytest.raises(DataLoaderError, match=f"column '{unfilled[0]}' has .* null value"):
                ArrowDataset(source, fill_null=fill)
            return
        dataset = ArrowDataset(source, fill_null=fill)
        want = expected_rows(table, fill)
        assert len(dataset) == len(want)
        assert [python_row(dataset[i]) for i in range(len(dataset))] == want
        if want:
            assert python_row(dataset[-1]) == want[-1]
            indices = data.draw(st.lists(st.integers(-len(want), len(want) - 1), max_size=12))
        else:
            indices = []
        assert_bulk_matches_rows(dataset, indices)


def _table(rows: int = 40) -> pa.Table:
    return sample_table(rows)


def _files(directory: Path, rows: int = 40) -> list[str]:
    table = _table(rows)
    return write_arrow(directory, cut_table(table, [[7, 0, 13], [20]]))


class _Double(Transform):  # module level: spawn workers unpickle it
    def apply(self, sample):
        return {**sample, "x": sample["x"] * 2}


@pytest.mark.parametrize("source", ["table", "files"])
@pytest.mark.parametrize("workers,context", [(0, None), (2, "fork"), (2, "spawn")])
def test_a_loader_gives_the_batches_a_plain_read_gives(tmp_path, source, workers, context):
    dataset = ArrowDataset(_table() if source == "table" else _files(tmp_path))
    sampler = RandomSampler(dataset, batch_size=8, seed=3)
    sampler.set_epoch(0)
    plain = [dataset.__getitems__(indices).batch for indices in sampler]
    sampler.set_epoch(0)
    loader = DataLoader(dataset, sampler, num_workers=workers, multiprocessing_context=context)
    assert_same_batches(collect(loader), collect(plain))


def test_a_per_sample_transform_runs_on_the_rows_in_workers(tmp_path):
    dataset = ArrowDataset(_files(tmp_path), columns=["x", "id"])
    sampler = SequentialSampler(dataset, batch_size=16)
    batches = collect(DataLoader(dataset, sampler, transform=_Double(), num_workers=2))
    assert [b["id"].tolist() for b in batches] == [list(range(0, 16)), list(range(16, 32)), list(range(32, 40))]
    np.testing.assert_array_equal(np.concatenate([b["x"] for b in batches]), np.arange(40, dtype=np.float32) * 0.5)


def test_files_are_mapped_and_a_column_is_one_array_over_all_record_batches(tmp_path):
    path = tmp_path / "data.feather"
    feather.write_feather(_table(1000), path, compression="uncompressed", chunksize=64)
    dataset = ArrowDataset(path)
    for name in ("id", "x", "flag", "vec"):
        arenas = dataset._fixed[name].arenas  # one view of the mapped file, not one per batch
        assert len(arenas) in (1, 16) and not arenas[0].flags.writeable
    assert len(dataset._fixed["id"].arenas) == 1
    assert set(dataset._fixed) == {"id", "x", "flag", "vec"}
    assert_bulk_matches_rows(dataset, [999, 0, 64, 63, 500, 0])


def test_pickling_carries_paths_and_the_copy_maps_the_files_again(tmp_path):
    dataset = ArrowDataset(_files(tmp_path, rows=40), columns=["name", "id"])
    data = pickle.dumps(dataset)
    assert len(data) < 2000  # paths and options, not the data
    copy = pickle.loads(data)
    assert copy.columns == ["name", "id"] and len(copy) == 40
    assert [python_row(copy[i]) for i in range(40)] == [python_row(dataset[i]) for i in range(40)]
    table_copy = pickle.loads(pickle.dumps(ArrowDataset(_table(), fill_null={"id": 0})))
    assert python_row(table_copy[5]) == python_row(ArrowDataset(_table())[5])


def test_files_through_a_filesystem_that_is_not_local_are_read_into_memory(tmp_path):
    _files(tmp_path)
    filesystem = pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem())
    dataset = ArrowDataset(["part-00.arrow", "part-01.arrow"], filesystem=filesystem)
    assert python_row(dataset[25]) == _table().slice(25, 1).to_pylist()[0]
    assert_bulk_matches_rows(dataset, [39, 0, 7, 20, 19])


def test_strings_arrow_keeps_string_columns_as_arrow_arrays_and_rows_as_str():
    dataset = ArrowDataset(_table(), columns=["name", "id"], strings="arrow")
    batch = dataset.__getitems__([3, 1]).batch
    assert isinstance(batch["name"], pa.Array) and batch["name"].to_pylist() == ["row3", "row1"]
    assert dataset[3] == {"name": "row3", "id": 3}


def test_bytes_of_encoded_images_come_out_as_bytes():
    image = pytest.importorskip("PIL.Image")
    pixels = np.arange(48, dtype=np.uint8).reshape(4, 4, 3)
    encoded = io.BytesIO()
    image.fromarray(pixels).save(encoded, format="PNG")
    dataset = ArrowDataset(pa.table({"image": [encoded.getvalue()] * 3, "label": [0, 1, 2]}))
    row = dataset[1]
    assert isinstance(row["image"], bytes) and row["label"] == 1
    np.testing.assert_array_equal(np.asarray(image.open(io.BytesIO(row["image"]))), pixels)
    batch = dataset.__getitems__([2, 0]).batch
    assert batch["image"].dtype == object and all(isinstance(b, bytes) for b in batch["image"])


def test_a_fixed_shape_tensor_column_comes_out_n_dimensional():
    tensor = pa.fixed_shape_tensor(pa.float32(), (2, 3))
    storage = pa.FixedSizeListArray.from_arrays(pa.array(np.arange(24, dtype=np.float32)), 6)
    dataset = ArrowDataset(pa.table({"t": pa.ExtensionArray.from_storage(tensor, storage)}))
    assert dataset[1]["t"].shape == (2, 3) and dataset[1]["t"][1, 2] == 11
    assert dataset.__getitems__([3, 0]).batch["t"].shape == (2, 2, 3)
    assert_bulk_matches_rows(dataset, [3, 0, 2])


def test_an_empty_batch_has_every_column():
    batch = ArrowDataset(_table()).__getitems__([]).batch
    assert list(batch) == _table().column_names and all(len(c) == 0 for c in batch.values())
    assert batch["vec"].shape == (0, 2) and batch["x"].dtype == np.float32


def test_indices_out_of_range_and_not_integers_are_errors_as_for_a_list():
    dataset = ArrowDataset(_table(5))
    assert dataset[-5]["id"] == 0
    for bad in (5, -6):
        with pytest.raises(IndexError, match=f"index {bad} is out of range for ArrowDataset of length 5"):
            dataset[bad]
    with pytest.raises(IndexError, match="index 7 is out of range"):
        dataset.__getitems__([0, 7])
    with pytest.raises(TypeError):
        dataset["a"]
    with pytest.raises(TypeError, match="indices must be integers"):
        dataset.__getitems__([0.5])


def test_nulls_are_an_error_naming_the_column_unless_filled():
    table = pa.table({"a": [1, 2, 3], "b": pa.array([1.0, None, 3.0])})
    with pytest.raises(DataLoaderError, match=r"column 'b' has 1 null value\(s\).*fill_null=\{'b': value\}"):
        ArrowDataset(table)
    assert ArrowDataset(table, fill_null={"b": -1.0})[1]["b"] == -1.0
    assert ArrowDataset(table, fill_null=0)[1]["b"] == 0.0
    assert ArrowDataset(table, columns=["a"])[1] == {"a": 2}  # a column left out may hold nulls


@pytest.mark.parametrize("kwargs,error,message", [
    ({"columns": "a"}, ArgumentTypeError, "`columns` must be a list of column names; got 'a'"),
    ({"columns": []}, ArgumentValueError, "must name at least one column"),
    ({"columns": ["a", "z"]}, ArgumentValueError, r"`columns` names 'z', which is not a column of the table; its columns are \['a', 'b'\]"),
    ({"columns": ["a", "a"]}, ArgumentValueError, "`columns` names 'a' twice"),
    ({"strings": "bytes"}, ArgumentValueError, "`strings` must be one of 'object', 'arrow'; got 'bytes'"),
    ({"fill_null": {"z": 0}}, ArgumentValueError, "`fill_null` names 'z', which is not a column of the table"),
    ({"fill_null": {"b": "text"}}, ArgumentValueError, "`fill_null` gives 'text' for column 'b', whose type double cannot hold it"),
    ({"filesystem": pafs.LocalFileSystem()}, ArgumentValueError, "`filesystem` applies to files"),
])
def test_bad_arguments_are_clear_errors(kwargs, error, message):
    with pytest.raises(error, match=message):
        ArrowDataset(pa.table({"a": [1, 2], "b": [None, 1.0]}), **{"fill_null": 0, **kwargs})


def test_bad_sources_are_clear_errors(tmp_path):
    with pytest.raises(ArgumentTypeError, match="`source` must be a pyarrow.Table, a path, a URI or a list of them; got int"):
        ArrowDataset(3)
    (tmp_path / "bad.arrow").write_bytes(b"not arrow at all")
    with pytest.raises(ArgumentValueError, match="cannot read .*bad.arrow.* as an Arrow IPC file"):
        ArrowDataset(tmp_path / "bad.arrow")
    good = write_arrow(tmp_path, [[pa.table({"a": [1]})]])[0]
    other = tmp_path / "other.arrow"
    feather.write_feather(pa.table({"a": [1.5]}), other)
    with pytest.raises(ArgumentValueError, match="every file given to ArrowDataset needs the same columns and types"):
        ArrowDataset([good, str(other)])


def test_a_dictionary_column_reads_as_its_values_and_fills_with_one():
    table = pa.table({"d": pa.array(["a", None, "b", "a"]).dictionary_encode()})
    dataset = ArrowDataset(table, fill_null={"d": "z"})
    assert [dataset[i]["d"] for i in range(4)] == ["a", "z", "b", "a"]
    assert dataset.__getitems__([3, 1]).batch["d"].tolist() == ["a", "z"]
    with pytest.raises(ArgumentValueError, match="`fill_null` gives 1.5 for column 'd'"):
        ArrowDataset(table, fill_null={"d": 1.5})
