"""write_parquet_shards: values, types and shapes survive a round trip through pyarrow.parquet;
shards and row groups have the sizes asked for; pages carry checksums; a failed or killed write
leaves only whole shards, and the in-progress marker that tells readers the data is not all there."""

from __future__ import annotations

import collections
import os
import struct
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from dataloader import ArrayDataset, Dataset
from dataloader.columnar import write_parquet_shards
from dataloader.columnar import _shard_files, _writer
from dataloader.columnar._files import WRITE_IN_PROGRESS
from dataloader.columnar._to_arrow import SHAPES_KEY, fixed_shapes
from dataloader.errors import ArgumentTypeError, ArgumentValueError


def read(directory) -> pa.Table:
    return pq.read_table(str(directory))


def restored(table: pa.Table, name: str) -> np.ndarray:
    """A column as an (rows, *shape) array, the shape taken from the schema metadata."""
    shape = fixed_shapes(table.schema).get(name, ())
    column = table.column(name).combine_chunks()
    for _ in shape:
        column = column.flatten()
    return column.to_numpy().reshape(len(table), *shape)


def files(directory) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


class Counting(Dataset):
    """A map dataset of (int32, float32[2, 3]) that counts how it is read."""

    def __init__(self, n: int, fail_at: int | None = None) -> None:
        self.labels = np.arange(n, dtype=np.int32)
        self.x = np.random.default_rng(0).random((n, 2, 3)).astype(np.float32)
        self.fail_at, self.single, self.bulk = fail_at, 0, 0

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i):
        self.single += 1
        if i == self.fail_at:
            raise RuntimeError(f"cannot read sample {i}")
        return self.labels[i], self.x[i]

    def __getitems__(self, indices):
        self.bulk += 1
        return [self[i] for i in indices]


def test_numbers_keep_their_width_and_python_numbers_are_64_bit(tmp_path):
    samples = [(np.int8(i), np.uint16(i), np.float32(i / 2), np.float16(i), i, i / 4, i % 2 == 0) for i in range(10)]
    write_parquet_shards(samples, tmp_path / "out")
    table = read(tmp_path / "out")
    types = [str(field.type) for field in table.schema]
    assert table.column_names == [f"col{i}" for i in range(7)]
    assert types == ["int8", "uint16", "float", "halffloat", "int64", "double", "bool"]
    for position, column in enumerate(zip(*samples)):
        assert table.column(position).to_pylist() == [v.item() if hasattr(v, "item") else v for v in column]


def test_array_dataset_columns_are_named_and_read_in_bulk(tmp_path):
    labels = np.arange(100, dtype=np.int32)
    images = np.random.default_rng(1).integers(0, 255, (100, 4, 5, 3), dtype=np.uint8)
    write_parquet_shards(ArrayDataset(labels, images), tmp_path / "out", columns=["label", "image"])
    table = read(tmp_path / "out")
    assert table.schema.field("label").type == pa.int32()
    image_type = table.schema.field("image").type
    assert pa.types.is_fixed_size_list(image_type) and image_type.list_size == 4
    assert image_type.value_type.list_size == 5 and image_type.value_type.value_type.list_size == 3
    assert fixed_shapes(table.schema) == {"image": (4, 5, 3)}
    assert np.array_equal(restored(table, "label"), labels)
    restored_images = restored(table, "image")
    assert restored_images.dtype == np.uint8 and np.array_equal(restored_images, images)


def test_arrays_given_per_sample_become_fixed_shape_columns(tmp_path):
    rows = [{"x": np.full((2, 3), i, np.float64), "v": np.arange(4, dtype=np.int16) + i} for i in range(7)]
    write_parquet_shards(iter(rows), tmp_path / "out")
    table = read(tmp_path / "out")
    assert table.column_names == ["x", "v"]
    assert fixed_shapes(table.schema) == {"x": (2, 3), "v": (4,)}
    assert np.array_equal(restored(table, "x"), np.stack([r["x"] for r in rows]))
    assert np.array_equal(restored(table, "v"), np.stack([r["v"] for r in rows]))
    assert restored(table, "v").dtype == np.int16


def test_bytes_strings_dicts_and_namedtuples(tmp_path):
    Row = collections.namedtuple("Row", "blob name score")
    rows = [Row(bytes([i]) * i, f"n{i}", i / 3) for i in range(12)]
    write_parquet_shards(rows, tmp_path / "nt")
    table = read(tmp_path / "nt")
    assert table.schema.field("blob").type == pa.binary() and table.schema.field("name").type == pa.string()
    assert table.to_pylist() == [row._asdict() for row in rows]

    dicts = [{"b": r.blob, "a": r.name, "skip": 0} for r in rows]
    write_parquet_shards(dicts, tmp_path / "dict", columns=["a", "b"])
    assert read(tmp_path / "dict").to_pylist() == [{"a": r.name, "b": r.blob} for r in rows]


def test_a_dict_of_columns_a_numpy_array_and_arrow_tables(tmp_path):
    x = np.arange(24, dtype=np.float32).reshape(8, 3)
    write_parquet_shards({"x": x, "y": np.arange(8)}, tmp_path / "dict")
    assert np.array_equal(restored(read(tmp_path / "dict"), "x"), x)

    write_parquet_shards(x, tmp_path / "array", columns=["x"])
    assert np.array_equal(restored(read(tmp_path / "array"), "x"), x)

    tables = [pa.table({"a": [1, 2, 3]}), pa.record_batch({"a": [4, 5]}), pa.table({"a": [6]})]
    paths = write_parquet_shards(iter(tables), tmp_path / "tables", rows_per_shard=4)
    assert [pq.read_metadata(p).num_rows for p in paths] == [4, 2]
    assert read(tmp_path / "tables").column("a").to_pylist() == [1, 2, 3, 4, 5, 6]
    write_parquet_shards(pa.table({"a": [1], "b": ["x"]}), tmp_path / "one", columns=["b"])
    assert read(tmp_path / "one").to_pylist() == [{"b": "x"}]


@pytest.mark.parametrize("rows,per_shard,group", [(1000, 300, 128), (1000, 250, None), (7, 3, 1), (64, 1000, 10)])
def test_shards_and_row_groups_have_the_sizes_asked_for(tmp_path, rows, per_shard, group):
    dataset = Counting(rows)
    paths = write_parquet_shards(dataset, tmp_path / "out", per_shard, row_group_size=group)
    counts = [min(per_shard, rows - start) for start in range(0, rows, per_shard)]
    assert [p.rsplit("/", 1)[1] for p in paths] == [f"part-{i:05d}.parquet" for i in range(len(counts))]
    assert files(tmp_path / "out") == [p.rsplit("/", 1)[1] for p in paths]
    group = group or per_shard
    for path, count in zip(paths, counts):
        meta = pq.read_metadata(path)
        assert meta.num_rows == count
        sizes = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
        assert sizes == [min(group, count - start) for start in range(0, count, group)]
    table = read(tmp_path / "out")
    assert np.array_equal(restored(table, "col0"), dataset.labels)
    assert np.array_equal(restored(table, "col1"), dataset.x)
    assert dataset.bulk >= len(paths) and dataset.single == rows  # every row read once, in bulk calls


def test_default_sizes_come_from_the_bytes_per_row(tmp_path, monkeypatch):
    monkeypatch.setattr(_writer, "GROUP_BYTES", 1000)
    monkeypatch.setattr(_writer, "SHARD_BYTES", 4000)
    x = np.zeros((100, 25), np.float32)  # 100 bytes a row: groups of 10 rows, shards of 40
    paths = write_parquet_shards(x, tmp_path / "out")
    assert [pq.read_metadata(p).num_rows for p in paths] == [40, 40, 20]
    assert pq.read_metadata(paths[0]).num_row_groups == 4


def test_a_failure_mid_write_leaves_whole_shards_and_the_marker(tmp_path):
    with pytest.raises(RuntimeError, match="cannot read sample 250") as caught:
        write_parquet_shards(Counting(1000, fail_at=250), tmp_path / "out", 100, row_group_size=30)
    assert files(tmp_path / "out") == [WRITE_IN_PROGRESS, "part-00000.parquet", "part-00001.parquet"]
    assert (tmp_path / "out" / WRITE_IN_PROGRESS).stat().st_size == 0
    assert read(tmp_path / "out").num_rows == 200
    if sys.version_info >= (3, 11):
        assert any("2 whole shard(s)" in note and WRITE_IN_PROGRESS in note for note in caught.value.__notes__)


def test_an_exception_from_the_source_iterable_leaves_the_marker(tmp_path):
    def rows():
        yield from ((i,) for i in range(12))
        raise KeyError("the source broke")

    with pytest.raises(KeyError, match="the source broke"):
        write_parquet_shards(rows(), tmp_path / "out", 5, row_group_size=5)
    assert files(tmp_path / "out") == [WRITE_IN_PROGRESS, "part-00000.parquet", "part-00001.parquet"]
    assert read(tmp_path / "out").column("col0").to_pylist() == list(range(10))


def test_a_successful_write_leaves_no_marker(tmp_path):
    out = tmp_path / "out"
    paths = write_parquet_shards(Counting(12), out, 5)
    assert files(out) == ["part-00000.parquet", "part-00001.parquet", "part-00002.parquet"]
    write_parquet_shards(Counting(3), out, 5, overwrite=True)
    assert files(out) == ["part-00000.parquet"] and len(paths) == 3


# Run in a child process: writes one whole shard, says so on stdout, then blocks reading stdin
# (the parent never writes to it) until the parent SIGKILLs it; no timing is involved.
_KILLED_WRITER = """
import sys
from dataloader.columnar import write_parquet_shards

def rows():
    yield from ((i,) for i in range(5))  # shard 0: whole once the writer asks for the sixth row
    print("first shard written", flush=True)
    sys.stdin.readline()
    yield (5,)

write_parquet_shards(rows(), sys.argv[1], 5, row_group_size=5)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")
def test_a_killed_write_leaves_the_marker(tmp_path):
    out = tmp_path / "out"
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    child = subprocess.Popen(
        [sys.executable, "-c", _KILLED_WRITER, str(out)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=root, env=env,
    )
    guard = threading.Timer(120, child.kill)  # only if the child hangs before it reports: no endless wait
    guard.start()
    try:
        said = child.stdout.readline()
        child.kill()  # SIGKILL: no exception handler, no finally runs in the child
    finally:
        guard.cancel()
        _, errors = child.communicate()
    assert said == "first shard written\n", errors
    assert child.returncode == -9
    assert files(out) == [WRITE_IN_PROGRESS, "part-00000.parquet"]
    assert pq.read_metadata(out / "part-00000.parquet").num_rows == 5


def test_a_failure_inside_the_parquet_writer_removes_its_temporary_file(tmp_path, monkeypatch):
    calls = []
    original = pq.ParquetWriter.write_table

    def fail_on_the_fifth(self, table, *args, **kwargs):
        calls.append(table.num_rows)
        if len(calls) == 5:
            raise OSError("disk full")
        return original(self, table, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetWriter, "write_table", fail_on_the_fifth)
    with pytest.raises(OSError, match="disk full"):
        write_parquet_shards(Counting(100), tmp_path / "out", 20, row_group_size=10)
    # the third was half written
    assert files(tmp_path / "out") == [WRITE_IN_PROGRESS, "part-00000.parquet", "part-00001.parquet"]


def test_a_killed_write_leaves_a_hidden_temporary_file_that_readers_skip_and_overwrite_removes(tmp_path):
    out = tmp_path / "out"
    write_parquet_shards(Counting(10), out, 5)
    (out / ".part-00002.parquet.tmp-0123abcd").write_bytes(b"PAR1 half")  # what a SIGKILL leaves
    assert read(out).num_rows == 10
    write_parquet_shards(Counting(3), out, 5, overwrite=True)
    assert files(out) == ["part-00000.parquet"]


def test_existing_shards_are_refused_unless_overwrite(tmp_path):
    out = tmp_path / "out"
    write_parquet_shards(Counting(50), out, 10)
    with pytest.raises(ArgumentValueError, match=r"already holds 5 shard\(s\).*overwrite=True"):
        write_parquet_shards(Counting(50), out, 10)
    write_parquet_shards(Counting(15), out, 10, overwrite=True)  # fewer shards: the stale ones go
    assert files(out) == ["part-00000.parquet", "part-00001.parquet"]
    assert read(out).num_rows == 15


def test_an_unfinished_write_is_refused_unless_overwrite_which_removes_all_it_left(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / WRITE_IN_PROGRESS).touch()  # a stale marker alone: the earlier write died before any shard
    with pytest.raises(ArgumentValueError, match=rf"holds {WRITE_IN_PROGRESS}: an earlier write.*0 whole shard"):
        write_parquet_shards(Counting(5), out)
    assert files(out) == [WRITE_IN_PROGRESS]

    with pytest.raises(RuntimeError):
        write_parquet_shards(Counting(30, fail_at=25), out, 10, row_group_size=5, overwrite=True)
    (out / ".part-00002.parquet.tmp-0123abcd").write_bytes(b"PAR1 half")  # as a SIGKILL leaves it
    with pytest.raises(ArgumentValueError, match=r"did not finish, and left 2 whole shard\(s\).*overwrite=True"):
        write_parquet_shards(Counting(5), out)
    write_parquet_shards(Counting(5), out, overwrite=True)
    assert files(out) == ["part-00000.parquet"]
    assert read(out).num_rows == 5


def test_overwrite_marks_the_directory_before_it_removes_the_old_shards(tmp_path):
    out = tmp_path / "out"
    write_parquet_shards(Counting(30), out, 10)
    seen = []

    class Watching(pafs.LocalFileSystem):
        def delete_file(self, path):
            seen.append(sorted(os.listdir(out)))
            raise OSError("interrupted while removing the old shards")

    filesystem = Watching()
    with pytest.raises(OSError, match="interrupted"):
        write_parquet_shards(Counting(5), str(out), overwrite=True, filesystem=filesystem)
    assert seen and WRITE_IN_PROGRESS in seen[0]
    assert WRITE_IN_PROGRESS in files(out)  # the remaining old shards no longer read as a dataset


def test_other_parquet_files_in_the_directory_are_refused_even_with_overwrite(tmp_path):
    out = tmp_path / "out"
    (out / "nested").mkdir(parents=True)
    pq.write_table(pa.table({"a": [1]}), out / "nested" / "data.parquet")
    with pytest.raises(ArgumentValueError, match="not shards of write_parquet_shards"):
        write_parquet_shards(Counting(5), out, overwrite=True)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ArgumentValueError, match="names the file"):
        write_parquet_shards(Counting(5), tmp_path / "file")


def test_a_file_uri_and_a_filesystem_object(tmp_path):
    uri = (tmp_path / "via uri").as_uri()
    paths = write_parquet_shards(Counting(30), uri, 20)
    assert paths == [f"{uri}/part-00000.parquet", f"{uri}/part-00001.parquet"]
    assert read(tmp_path / "via uri").num_rows == 30
    filesystem = pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem())
    paths = write_parquet_shards(Counting(5), "sub/dir", filesystem=filesystem)
    assert paths == ["sub/dir/part-00000.parquet"]
    assert read(tmp_path / "sub" / "dir").num_rows == 5


def test_compression_and_metadata(tmp_path):
    paths = write_parquet_shards(Counting(5), tmp_path / "out", compression="snappy", metadata={"origin": "test"})
    assert pq.read_metadata(paths[0]).row_group(0).column(0).compression == "SNAPPY"
    schema = pq.read_schema(paths[0])
    assert schema.metadata[b"origin"] == b"test" and SHAPES_KEY in schema.metadata
    write_parquet_shards(Counting(5), tmp_path / "none", compression=None)


def _flip_a_value_byte(path: str, value: int) -> None:
    """Flip one byte of ``value``'s 8 bytes (stored once in the file, inside a page of column 0)."""
    data = bytearray(Path(path).read_bytes())
    pattern = struct.pack("<q", value)
    assert data.count(pattern) == 1  # not a min or max, so in no statistics: only in the values
    chunk = pq.ParquetFile(path).metadata.row_group(0).column(0)
    start = chunk.dictionary_page_offset or chunk.data_page_offset
    position = data.index(pattern) + 3
    assert start < position < start + chunk.total_compressed_size
    data[position] ^= 0x10
    Path(path).write_bytes(data)


@pytest.mark.parametrize("checksums", [True, False])
def test_page_checksums_are_written_unless_turned_off(tmp_path, checksums):
    values = np.arange(1000, dtype=np.int64) * 7 + 1_000_000_007
    options = {} if checksums else {"page_checksums": False}
    [path] = write_parquet_shards({"v": values}, tmp_path / "out", compression="none", **options)
    _flip_a_value_byte(path, int(values[500]))
    unverified = pq.ParquetFile(path).read().column("v").to_numpy()  # no check: a wrong value, silently
    assert np.flatnonzero(unverified != values).tolist() == [500]
    if checksums:
        with pytest.raises(OSError, match="CRC checksum verification failed"):
            pq.ParquetFile(path, page_checksum_verification=True).read()
    else:  # nothing to verify against
        assert pq.ParquetFile(path, page_checksum_verification=True).read().column("v")[500].as_py() != values[500]


def test_the_empty_string_is_not_the_current_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ArgumentValueError, match=r"`directory` is an empty string.*\"\.\" for the current"):
        write_parquet_shards(Counting(5), "")
    with pytest.raises(ArgumentValueError, match="empty string"):
        write_parquet_shards(Counting(5), "", filesystem=pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem()))
    assert list(tmp_path.iterdir()) == []
    write_parquet_shards(Counting(5), ".")
    assert files(tmp_path) == ["part-00000.parquet"]


def test_the_docstrings_describe_the_marker():
    assert WRITE_IN_PROGRESS in (_shard_files.__doc__ or "")
    assert WRITE_IN_PROGRESS in (write_parquet_shards.__doc__ or "")


def test_progress_bar_and_its_missing_dependency(tmp_path, capsys, monkeypatch):
    write_parquet_shards(Counting(20), tmp_path / "out", progress=True)
    assert "20" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "tqdm", None)
    with pytest.raises(ArgumentValueError, match="pip install tqdm"):
        write_parquet_shards(Counting(20), tmp_path / "again", progress=True)


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        ({"rows_per_shard": 0}, ArgumentValueError, "`rows_per_shard` must be a positive integer"),
        ({"row_group_size": 1.5}, ArgumentTypeError, "`row_group_size` must be a positive integer"),
        ({"compression": "lzma"}, ArgumentValueError, "`compression` must be one of"),
        ({"columns": "label"}, ArgumentTypeError, "`columns` must be a list of column names"),
        ({"columns": ["a", "a"]}, ArgumentValueError, "distinct"),
        ({"columns": ["a"]}, ArgumentValueError, "tuples of 2 fields"),
        ({"metadata": {"a": 1}}, ArgumentTypeError, "`metadata` must be a dict of strings"),
        ({"overwrite": "yes"}, ArgumentTypeError, "`overwrite` must be True or False"),
        ({"page_checksums": 1}, ArgumentTypeError, "`page_checksums` must be True or False"),
    ],
)
def test_arguments_are_checked(tmp_path, kwargs, error, match):
    with pytest.raises(error, match=match):
        write_parquet_shards(Counting(5), tmp_path / "out", **kwargs)


@pytest.mark.parametrize(
    "data,match",
    [
        ([], "holds no rows"),
        ("text", "`data` must be a dataset"),
        ([(1, 2), (1, 2, 3)], "sample 1 is a tuple of 3 fields"),
        ([{"a": 1}, {"b": 2}], "sample 1 has the keys"),
        ([np.zeros(3), np.zeros(4)], "arrays of shape"),
        ([{1: 2}], "string keys"),
        ([(1,), ("x",)], "cannot make one column"),
    ],
)
def test_samples_that_cannot_be_a_table_are_clear_errors(tmp_path, data, match):
    with pytest.raises((ArgumentValueError, ArgumentTypeError), match=match):
        write_parquet_shards(data, tmp_path / "out")


def test_a_later_chunk_of_another_type_names_the_samples(tmp_path):
    rows = [(i,) for i in range(10)] + [("text",)] * 10
    with pytest.raises(ArgumentValueError, match=r"samples 10\.\.19 do not fit the columns") as caught:
        write_parquet_shards(rows, tmp_path / "out", row_group_size=10)
    assert "col0: int64" in str(caught.value)
    assert not any(name.startswith(".") for name in files(tmp_path / "out"))


def test_max_shards_keeps_the_names_sortable(tmp_path, monkeypatch):
    monkeypatch.setattr(_shard_files, "MAX_SHARDS", 2)
    with pytest.raises(ArgumentValueError, match="raise rows_per_shard"):
        write_parquet_shards(Counting(5), tmp_path / "out", 2)
    assert files(tmp_path / "out") == [WRITE_IN_PROGRESS, "part-00000.parquet", "part-00001.parquet"]
