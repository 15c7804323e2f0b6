"""A loader's saved state holds what its columnar files are (their sizes and stamps), so it
refuses to resume over the same names rewritten with other rows in the same layout, and a state
of the format before that (which could not tell) is refused as older."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest

from dataloader import (
    ArgumentValueError, ArrowDataset, ArrowStream, DataLoader, ParquetDataset, ParquetStream, SequentialSampler,
    StreamSampler, TarStream, write_tar_shards,
)


def _parquet(folder: Path, first: int) -> None:
    for number in range(2):  # the same sizes whatever `first` is: plain encoding, no statistics
        ids = pa.table({"id": np.arange(first + 100 * number, first + 100 * (number + 1), dtype=np.int64)})
        pq.write_table(ids, folder / f"part-{number}.parquet", row_group_size=25, compression="none",
                       use_dictionary=False, write_statistics=False)


def _arrow(folder: Path, first: int) -> None:
    for number in range(2):
        ids = pa.table({"id": np.arange(first + 100 * number, first + 100 * (number + 1), dtype=np.int64)})
        feather.write_feather(ids, str(folder / f"part-{number}.arrow"), compression="uncompressed", chunksize=25)


def _tar(folder: Path, first: int) -> None:
    samples = [{"__key__": f"k{i:04d}", "cls": first + i} for i in range(200)]
    write_tar_shards(samples, folder, samples_per_shard=100, overwrite=True)


def _rewritten(folder: Path, write, first: int) -> None:
    """The files of ``folder`` written again with other rows, in the same layout, a second later."""
    before = {name: os.stat(folder / name) for name in os.listdir(folder)}
    write(folder, first)
    for name, status in before.items():
        if (folder / name).exists():
            assert os.path.getsize(folder / name) == status.st_size  # the same layout, the same sizes
            later = status.st_mtime_ns + 10**9
            os.utime(folder / name, ns=(later, later))


READERS = {
    "ParquetStream": (_parquet, lambda f: DataLoader(ParquetStream(f, batch_size=10), StreamSampler())),
    "ArrowStream": (_arrow, lambda f: DataLoader(ArrowStream(f, batch_size=10), StreamSampler())),
    "TarStream": (_tar, lambda f: DataLoader(TarStream(f), StreamSampler(batch_size=10))),
    "ParquetDataset": (_parquet, lambda f: _map_loader(ParquetDataset(f))),
    "ArrowDataset": (_arrow, lambda f: _map_loader(ArrowDataset(f))),
}


def _map_loader(dataset) -> DataLoader:
    return DataLoader(dataset, SequentialSampler(dataset, batch_size=10))


def _state_after(loader: DataLoader, batches: int) -> dict:
    with iter(loader) as epoch:
        for _ in range(batches):
            next(epoch)
        return loader.state_dict()


@pytest.mark.parametrize("kind", sorted(READERS))
def test_a_state_is_refused_over_files_rewritten_in_the_same_layout(tmp_path, kind):
    write, loader_of = READERS[kind]
    folder = tmp_path / "data"
    folder.mkdir()
    write(folder, 0)
    state = _state_after(loader_of(folder), 5)
    _rewritten(folder, write, 1000)
    field = "dataset" if kind.endswith("Dataset") else "stream"
    with pytest.raises(ArgumentValueError, match=rf"saved by a loader with {field}\.stamps="):
        loader_of(folder).load_state_dict(state)
    fresh = next(iter(loader_of(folder)))  # the files as they are now, from the epoch's start
    assert int(np.asarray(fresh["cls" if kind == "TarStream" else "id"])[0]) == 1000


def test_a_state_of_the_format_before_the_files_stamps_is_refused_as_older(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    _parquet(folder, 0)
    state = _state_after(READERS["ParquetStream"][1](folder), 3)
    older = {**state, "format": "dataloader.state/2"}
    with pytest.raises(ArgumentValueError, match=r"'dataloader\.state/2'.*older version.*set_epoch"):
        READERS["ParquetStream"][1](folder).load_state_dict(older)


# --- a stream's own state, loaded directly (not through a DataLoader) ------------------------

STREAMS = {"ParquetStream": (_parquet, ParquetStream), "ArrowStream": (_arrow, ArrowStream), "TarStream": (_tar, TarStream)}
SAVED = dict(shuffle=True, seed=1, shuffle_buffer=0, world_size=2, rank=0)


@pytest.mark.parametrize("field,value", [
    ("seed", 2), ("shuffle", False), ("shuffle_buffer", 7), ("world_size", 1), ("rank", 1),
])
@pytest.mark.parametrize("kind", STREAMS)
def test_a_stream_refuses_a_state_of_another_setting_naming_it(tmp_path, kind, field, value):
    write, stream_type = STREAMS[kind]
    write(tmp_path, 0)
    saved = stream_type(tmp_path, **SAVED)
    epoch = iter(saved)
    next(epoch)
    state = saved.state_dict()
    with pytest.raises(ArgumentValueError, match=rf"{kind}\.load_state_dict: the state was saved by a stream with "
                                                 rf"{field}={SAVED[field]!r}; this stream has {field}={value!r}"):
        stream_type(tmp_path, **{**SAVED, field: value}).load_state_dict(state)
    stream_type(tmp_path, **SAVED).load_state_dict(state)  # the same settings take it


@pytest.mark.parametrize("kind", STREAMS)
def test_a_stream_refuses_a_state_of_other_or_rewritten_files_or_without_its_order(tmp_path, kind):
    write, stream_type = STREAMS[kind]
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        write(tmp_path / folder, 0)
    for name in os.listdir(tmp_path / "b"):
        if name.startswith("part-1") or name.startswith("part-00001"):
            os.remove(tmp_path / "b" / name)  # b: the first file of a only
    state = stream_type(tmp_path / "a").state_dict()
    with pytest.raises(ArgumentValueError, match=r"the state was saved by a stream with files=.*rows would come from other files"):
        stream_type(tmp_path / "b").load_state_dict(state)
    _rewritten(tmp_path / "a", write, 5000)
    with pytest.raises(ArgumentValueError, match=r"with stamps=.*the files were rewritten since"):
        stream_type(tmp_path / "a").load_state_dict(state)
    with pytest.raises(ArgumentValueError, match=r"older version holds no 'order'"):
        stream_type(tmp_path / "b").load_state_dict({"epoch": 0, "rows": 10})


def test_a_mix_of_streams_keeps_its_state_small(tmp_path):
    """The order a state carries is short values and digests: no file list, however many files."""
    from dataloader import MixedStream
    _parquet(tmp_path, 0)
    state = MixedStream({"a": ParquetStream(tmp_path), "b": ParquetStream(tmp_path, seed=3)}).state_dict()
    columns = [f"a_long_column_name_{i}" for i in range(50)]
    pq.write_table(pa.table({name: [1] for name in columns}), tmp_path / "wide.parquet")
    stream_state = ParquetStream(tmp_path / "wide.parquet", columns=columns).state_dict()
    assert all(len(repr(value)) <= 50 for value in stream_state["order"].values())  # the columns as a digest
    assert len(repr(state)) < 400
