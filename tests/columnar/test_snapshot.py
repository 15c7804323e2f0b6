"""Columnar readers never lose or repeat rows because of what happens to their files.

Every reader reads the files as they were when it was built: a file replaced,
rewritten, truncated or removed afterwards is a typed error naming it
(``SourceChangedError`` / ``DataFileError``), never rows read through stale
metadata. Directories are walked once per real directory, and a file reached
twice is refused. Errors while reading name the file and the row group.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dataloader import (
    ArgumentValueError, DataFileError, DataLoader, SequentialSampler, SourceChangedError, StreamSampler,
)
from dataloader.columnar import ArrowDataset, ArrowStream, ParquetDataset, ParquetStream
from dataloader.columnar._files import WRITE_IN_PROGRESS


def _write(path: Path, ids: np.ndarray, group: int = 100, **options) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"id": ids}), path, row_group_size=group, **options)
    return path


def _replace(path: Path, ids: np.ndarray, group: int = 100) -> None:
    """Replace ``path`` by a new file, the way a job that refreshes data does (write, rename)."""
    temp = path.with_name(path.name + ".new")
    pq.write_table(pa.table({"id": ids}), temp, row_group_size=group)
    _rename_within_one_tick(temp, path)


def _rename_within_one_tick(temp: Path, path: Path) -> None:
    """``os.replace(temp, path)``, with the old file's modification time kept: the coarse clock
    often gives two quick writes the same time, so only the file's identity may tell."""
    before = path.stat()
    os.replace(temp, path)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def _ids(source, workers: int = 0, **options) -> np.ndarray:
    if isinstance(source, (ParquetStream, ArrowStream)):
        loader = DataLoader(source, StreamSampler(), num_workers=workers, parallel_stream=workers > 0, **options)
    else:
        loader = DataLoader(source, SequentialSampler(source, batch_size=64), num_workers=workers, **options)
    return np.concatenate([batch["id"] for batch in loader])


# -- a file replaced between epochs --------------------------------------------------------------


@pytest.mark.parametrize("workers", [0, 2])
def test_a_parquet_file_replaced_between_epochs_is_named_not_read_through_stale_footers(tmp_path, workers, no_leaks):
    path = _write(tmp_path / "data" / "a.parquet", np.arange(500), group=100)
    stream = ParquetStream(tmp_path / "data", batch_size=64)
    assert np.array_equal(np.sort(_ids(stream, workers)), np.arange(500))
    _replace(path, np.arange(900) + 10_000, group=100)  # 9 row groups where the footer said 5
    with pytest.raises(SourceChangedError, match="a.parquet' changed after the ParquetStream") as caught:
        _ids(stream, workers)
    assert caught.value.path == str(path) or str(path) in str(caught.value)


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_map_datasets_refuse_a_file_replaced_before_a_worker_opened_it(tmp_path, method, no_leaks):
    path = _write(tmp_path / "a.parquet", np.arange(300))
    dataset = ParquetDataset(path)
    _replace(path, np.arange(300) + 5_000)  # same counts, other rows: only the stamp tells
    with pytest.raises(SourceChangedError, match="ParquetDataset read its metadata"):
        _ids(dataset, 2, multiprocessing_context=method)

    arrow = tmp_path / "a.arrow"
    feather.write_feather(pa.table({"id": np.arange(300)}), arrow, compression="uncompressed")
    mapped = ArrowDataset(arrow)
    temp = tmp_path / "b.arrow"
    feather.write_feather(pa.table({"id": np.arange(300) + 5_000}), temp, compression="uncompressed")
    _rename_within_one_tick(temp, arrow)
    assert np.array_equal(_ids(mapped), np.arange(300))  # this process maps the file it built on
    if method == "spawn":  # a spawned worker maps the file again: it must not read the new one
        with pytest.raises(SourceChangedError, match="a.arrow' changed after the ArrowDataset"):
            _ids(mapped, 2, multiprocessing_context=method)


def test_an_arrow_stream_refuses_a_replaced_file(tmp_path):
    arrow = tmp_path / "a.arrow"
    feather.write_feather(pa.table({"id": np.arange(200)}), arrow, compression="uncompressed", chunksize=50)
    stream = ArrowStream(arrow, batch_size=32)
    _ids(stream)
    temp = tmp_path / "b.arrow"
    feather.write_feather(pa.table({"id": np.arange(300)}), temp, compression="uncompressed", chunksize=50)
    os.replace(temp, arrow)
    with pytest.raises(SourceChangedError, match="ArrowStream"):
        _ids(stream)


# -- files gone, truncated, corrupt ----------------------------------------------------------------


def test_a_removed_or_emptied_file_is_named(tmp_path):
    path = _write(tmp_path / "a.parquet", np.arange(300))
    stream, dataset = ParquetStream(path, batch_size=64), ParquetDataset(path)
    path.write_bytes(b"")
    for reader in (stream, dataset):
        with pytest.raises(SourceChangedError, match="size .* -> 0 bytes"):
            _ids(reader)
    path.unlink()
    for reader in (stream, dataset):
        with pytest.raises(DataFileError, match="is gone") as caught:
            _ids(reader)
        assert caught.value.path == str(path)


def _corrupt_page(path: Path, group: int) -> None:
    """Overwrite the header of row group ``group``'s first data page, keeping the file's
    size and its modification time (the damage a disk or a copy does)."""
    before = os.stat(path)
    offset = pq.ParquetFile(path).metadata.row_group(group).column(0).data_page_offset
    with open(path, "r+b") as file:
        file.seek(offset)
        file.write(b"\x7f" * 16)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def _flip_a_value(path: Path, group: int) -> None:
    """Change one value inside row group ``group``'s data, keeping size and modification time."""
    before = os.stat(path)
    column = pq.ParquetFile(path).metadata.row_group(group).column(0)
    with open(path, "r+b") as file:
        file.seek(column.data_page_offset + column.total_compressed_size - 16)
        file.write(b"\x7f")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


@pytest.mark.parametrize("kind", ["stream", "dataset"])
def test_a_corrupt_page_names_the_file_and_the_row_group(tmp_path, kind):
    path = _write(tmp_path / "a.parquet", np.arange(500), compression="none", use_dictionary=False)
    _corrupt_page(path, 3)
    reader = ParquetStream(path, batch_size=64) if kind == "stream" else ParquetDataset(path)
    with pytest.raises(DataFileError, match="cannot read row group 3 of .*a.parquet") as caught:
        _ids(reader)
    assert (caught.value.path, caught.value.unit) == (str(path), 3)


@pytest.mark.parametrize("kind", ["stream", "dataset"])
def test_verify_checksums_turns_a_silently_wrong_value_into_an_error(tmp_path, kind):
    path = _write(tmp_path / "a.parquet", np.arange(500), compression="none", use_dictionary=False,
                  write_page_checksum=True)
    _flip_a_value(path, 2)
    make = (lambda **kw: ParquetStream(path, batch_size=64, **kw)) if kind == "stream" else (
        lambda **kw: ParquetDataset(path, **kw))
    unchecked = _ids(make())
    assert (unchecked != np.arange(500)).sum() == 1  # what reading without checksums hands out
    with pytest.raises(DataFileError, match="row group 2 of .*CRC checksum verification failed"):
        _ids(make(verify_checksums=True))


def test_verify_checksums_is_refused_for_arrow_files(tmp_path):
    arrow = tmp_path / "a.arrow"
    feather.write_feather(pa.table({"id": np.arange(10)}), arrow)
    with pytest.raises(ArgumentValueError, match="Arrow IPC files carry none"):
        ArrowStream(arrow, verify_checksums=True)


def test_a_fill_value_a_column_cannot_hold_is_an_argument_error(tmp_path):
    path = tmp_path / "lists.parquet"
    pq.write_table(pa.table({"id": [[1], None, [2, 3]]}), path)
    for reader in (ParquetStream(path, batch_size=2, fill_null=0), ParquetDataset(path, fill_null=0)):
        with pytest.raises(ArgumentValueError, match="gives 0 for column 'id', whose type list"):
            _ids(reader)
    with pytest.raises(ArgumentValueError, match="gives 'x' for column 'id'"):
        ParquetStream(path, fill_null={"id": "x"})


# -- which files a source names ------------------------------------------------------------------------


def test_a_symlink_loop_is_walked_once(tmp_path):
    _write(tmp_path / "loop" / "x.parquet", np.arange(10))
    (tmp_path / "loop" / "sub").mkdir()
    os.symlink(tmp_path / "loop", tmp_path / "loop" / "sub" / "back")
    os.symlink(tmp_path / "loop", tmp_path / "alias")  # a second name for the same directory
    for reader in (ParquetStream(tmp_path / "loop", batch_size=4), ParquetDataset(tmp_path / "loop")):
        assert np.array_equal(np.sort(_ids(reader)), np.arange(10))
    assert len(ParquetDataset(tmp_path)) == 10  # loop/ and alias/ are one directory


def test_a_file_reached_twice_is_refused(tmp_path):
    path = _write(tmp_path / "d" / "x.parquet", np.arange(10))
    os.symlink(path, tmp_path / "d" / "y.parquet")
    for make in (ParquetStream, ParquetDataset):
        with pytest.raises(ArgumentValueError, match="reaches one file twice"):
            make([path, str(path)])
        with pytest.raises(ArgumentValueError, match="twice: .*x.parquet' and .*y.parquet'"):
            make(tmp_path / "d")


def test_a_directory_still_being_written_is_refused(tmp_path):
    _write(tmp_path / "d" / "part-00000.parquet", np.arange(10))
    (tmp_path / "d" / WRITE_IN_PROGRESS).touch()
    for make in (ParquetStream, ParquetDataset):
        with pytest.raises(ArgumentValueError, match="has not finished writing"):
            make(tmp_path / "d")


def test_files_with_reordered_columns_read_alike_and_extra_columns_need_a_choice(tmp_path):
    pq.write_table(pa.table({"id": np.arange(5), "y": np.zeros(5)}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"y": np.ones(5), "id": np.arange(5, 10)}), tmp_path / "b.parquet")
    for reader in (ParquetStream(tmp_path, batch_size=10), ParquetDataset(tmp_path)):
        batch = next(iter(DataLoader(reader, StreamSampler() if isinstance(reader, ParquetStream)
                                     else SequentialSampler(reader, batch_size=10))))
        assert list(batch) == ["id", "y"] and np.array_equal(batch["id"], np.arange(10))
    pq.write_table(pa.table({"id": np.arange(10, 15), "y": np.ones(5), "z": np.ones(5)}), tmp_path / "c.parquet")
    for make in (ParquetStream, ParquetDataset):
        with pytest.raises(ArgumentValueError, match="needs the same columns and types"):
            make(tmp_path)
        assert make(tmp_path, columns=["id", "y"]) is not None


# -- every epoch: one snapshot exactly once, or the typed error ------------------------------------------

_CHANGES = st.sampled_from(["none", "replace", "truncate", "remove", "touch"])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sizes=st.lists(st.integers(1, 60), min_size=1, max_size=4),
    group=st.integers(3, 25),
    nested=st.booleans(),
    linked=st.booleans(),
    repeated=st.booleans(),
    kind=st.sampled_from(["stream", "dataset"]),
    changes=st.lists(st.tuples(st.integers(0, 3), _CHANGES), min_size=1, max_size=3),
)
def test_every_epoch_reads_one_snapshot_exactly_once_or_names_the_file(
    tmp_path, sizes, group, nested, linked, repeated, kind, changes
):
    root = tmp_path / "case"
    shutil.rmtree(root, ignore_errors=True)
    paths, start = [], 0
    for number, size in enumerate(sizes):
        folder = root / f"d{number % 2}" if nested else root
        paths.append(_write(folder / f"f{number}.parquet", np.arange(start, start + size), group))
        start += size
    if linked:  # a link back to the top: walked once
        os.symlink(root, paths[0].parent / "up")
    snapshot = np.arange(start)
    make = (lambda source: ParquetStream(source, batch_size=16, shuffle=True)) if kind == "stream" else ParquetDataset
    if repeated:  # a file named twice: refused, never read twice
        with pytest.raises(ArgumentValueError, match="reaches one file twice"):
            make([root, paths[-1]])
    reader = make(root)
    assert np.array_equal(np.sort(_ids(reader)), snapshot)
    changed: set[str] = set()
    for number, change in changes:
        path = paths[number % len(paths)]
        if change == "replace" and path.exists():
            _replace(path, np.arange(10_000, 10_000 + 2 * group + 1), group)
        elif change == "truncate" and path.exists():
            with open(path, "r+b") as file:
                file.truncate(os.path.getsize(path) // 2)
        elif change == "remove" and path.exists():
            path.unlink()
        elif change == "touch" and path.exists():
            stat = os.stat(path)
            os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
        else:
            continue
        changed.add(str(path))
        try:
            ids = _ids(reader)
        except DataFileError as error:
            assert error.path in changed, (error.path, changed)
            continue
        # No error: then the reader still holds the files it opened before (a map dataset's
        # open handles), and the epoch is that snapshot, whole.
        assert np.array_equal(np.sort(ids), snapshot)


def test_a_stream_refuses_a_world_size_without_a_rank(tmp_path, monkeypatch):
    path = _write(tmp_path / "a.parquet", np.arange(40))
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.delenv("RANK", raising=False)
    with pytest.raises(ArgumentValueError, match="`WORLD_SIZE` is 4 but no rank is given.*RANK"):
        ParquetStream(path, batch_size=4)
    monkeypatch.setenv("RANK", "3")
    assert ParquetStream(path, batch_size=4).rank == 3
