"""What tells one version of a remote file from another, and the errors of reaching it: an object
replaced by one of the same size (fsspec stores: ETag, LastModified), a body cut short with a
Content-Length to match, a denied or failing store while a reader is built, a cache folder
that is full, deleted or empty-named."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import warnings

from fsspec.implementations.memory import MemoryFileSystem
import numpy as np
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest

from dataloader import (
    ArgumentValueError, ArrowDataset, ArrowStream, CacheError, DataLoader, ParquetDataset, ParquetStream,
    RemoteReadError, SourceChangedError, StreamSampler, TarStream, write_tar_shards,
)
from tests.remote.s3 import CLIENT_ENV, pyarrow_s3, put_object, s3fs_filesystem

ROWS = 400  # per file: 4 row groups of 100


def _parquet(first: int, rows: int = ROWS) -> bytes:
    """A Parquet file of ids ``first..first+rows`` whose size does not depend on ``first``."""
    sink = pa.BufferOutputStream()
    table = pa.table({"id": np.arange(first, first + rows, dtype=np.int64)})
    pq.write_table(table, sink, row_group_size=100, compression="none", use_dictionary=False, write_statistics=False)
    return sink.getvalue().to_pybytes()


@pytest.fixture
def files(s3_server, bucket):
    """Two Parquet objects under ``bucket/data/`` (ids 0..399 and 400..799): the remote prefix."""
    for number in range(2):
        put_object(s3_server.endpoint, bucket, f"data/part-{number}.parquet", _parquet(number * ROWS))
    return f"{bucket}/data"


def _ids(stream) -> list[int]:
    return [int(i) for batch in stream for i in batch.batch["id"]]


# --- an object replaced by one of the same size ---------------------------------------------


def test_an_fsspec_object_replaced_by_one_of_the_same_size_mid_epoch_is_an_error(files, s3_server, s3_proxy):
    """s3fs's info() has no ``mtime``: the stamp must hold its ETag, or the new rows pass as the old."""
    bucket = files.split("/")[0]
    assert len(_parquet(0)) == len(_parquet(5000))
    fs = s3fs_filesystem(s3_proxy.endpoint)
    stream = ParquetStream(f"s3://{files}", filesystem=fs, batch_size=100, read_ahead=0)  # files opened in turn
    epoch = iter(stream)
    assert [int(i) for i in next(epoch).batch["id"]] == list(range(100))
    put_object(s3_server.endpoint, bucket, "data/part-1.parquet", _parquet(5000))  # not opened yet
    with pytest.raises(SourceChangedError, match=r"part-1\.parquet.*version ETag="):
        for _ in epoch:
            pass


def test_a_parallel_stream_notices_an_fsspec_object_replaced_between_build_and_epoch(files, s3_server, s3_proxy, s3_env):
    bucket = files.split("/")[0]
    stream = ParquetStream(f"s3://{files}", filesystem=s3fs_filesystem(s3_proxy.endpoint), batch_size=100)
    put_object(s3_server.endpoint, bucket, "data/part-0.parquet", _parquet(5000))
    loader = DataLoader(stream, StreamSampler(), num_workers=2, parallel_stream=True)
    with pytest.raises(SourceChangedError, match=r"part-0\.parquet"):
        list(loader)


def test_a_new_reader_does_not_read_the_cached_copy_of_a_replaced_fsspec_object(files, s3_server, s3_proxy, tmp_path):
    bucket, cache = files.split("/")[0], str(tmp_path / "cache")
    fs = s3fs_filesystem(s3_proxy.endpoint)
    assert _ids(ParquetStream(f"s3://{files}", filesystem=fs, batch_size=100, cache_dir=cache)) == list(range(2 * ROWS))
    put_object(s3_server.endpoint, bucket, "data/part-0.parquet", _parquet(5000))
    fresh = ParquetStream(f"s3://{files}", filesystem=fs, batch_size=100, cache_dir=cache)
    assert _ids(fresh) == list(range(5000, 5000 + ROWS)) + list(range(ROWS, 2 * ROWS))
    dataset = ParquetDataset(f"s3://{files}", filesystem=fs, cache_dir=cache)
    assert int(dataset[0]["id"]) == 5000


def test_a_new_tar_stream_does_not_read_the_cached_copy_of_a_replaced_fsspec_shard(s3_server, bucket, s3_proxy, tmp_path):
    def shard(letter: str) -> bytes:
        folder = tmp_path / letter
        write_tar_shards([{"__key__": f"k{i:03d}", "txt": f"{letter}{i:03d}"} for i in range(25)], folder)
        [name] = [n for n in os.listdir(folder) if n.endswith(".tar")]
        return (folder / name).read_bytes()

    old, new = shard("a"), shard("b")
    assert len(old) == len(new)
    put_object(s3_server.endpoint, bucket, "tars/part-00000.tar", old)
    fs, cache = s3fs_filesystem(s3_proxy.endpoint), str(tmp_path / "cache")
    assert {row["txt"][0] for row in TarStream(f"s3://{bucket}/tars", filesystem=fs, cache_dir=cache)} == {"a"}
    put_object(s3_server.endpoint, bucket, "tars/part-00000.tar", new)
    fresh = TarStream(f"s3://{bucket}/tars", filesystem=fs, cache_dir=cache)
    assert {row["txt"][0] for row in fresh} == {"b"}


def test_an_fsspec_store_without_times_or_tags_warns_and_its_copies_serve_one_reader(tmp_path):
    """A store whose info() says only the size: a same-size replacement cannot show, so the
    reader says so, and a later reader fetches its own copy instead of trusting an old one."""
    fs = _SizesOnly(skip_instance_cache=True)
    fs.store, fs.pseudo_dirs = {}, [""]
    fs.pipe("/bare/part-0.parquet", _parquet(0))
    cache = str(tmp_path / "cache")
    with pytest.warns(UserWarning, match=r"no modification time, ETag or version id.*part-0\.parquet"):
        first = ParquetStream("/bare", filesystem=fs, batch_size=100, cache_dir=cache)
    assert _ids(first) == list(range(ROWS))
    fs.pipe("/bare/part-0.parquet", _parquet(5000))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        second = ParquetStream("/bare", filesystem=fs, batch_size=100, cache_dir=cache)
    assert _ids(second) == list(range(5000, 5000 + ROWS))


def test_a_file_of_fsspec_memory_replaced_by_one_of_the_same_size_is_an_error():
    """fsspec's memory filesystem says ``created``, not ``mtime``: that is its version."""
    fs = MemoryFileSystem(skip_instance_cache=True)
    fs.store, fs.pseudo_dirs = {}, [""]  # a store of its own, not the class's shared one
    fs.pipe("/mem/part-0.parquet", _parquet(0))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # it has a time: no warning
        stream = ParquetStream("/mem", filesystem=fs, batch_size=100)
    fs.pipe("/mem/part-0.parquet", _parquet(5000))
    with pytest.raises(SourceChangedError, match=r"part-0\.parquet"):
        _ids(stream)


class _SizesOnly(MemoryFileSystem):
    """fsspec's memory filesystem, its info() cut to what an HTTP server without headers gives."""

    protocol = ("sizes-only",)

    def info(self, path, **kwargs):
        found = super().info(path, **kwargs)
        return {key: found[key] for key in ("name", "size", "type")}


# --- a body cut short, a store that refuses or keeps failing while a reader is built ----------


def test_a_short_body_with_a_matching_length_is_read_again(files, s3_proxy):
    fs = pyarrow_s3(s3_proxy.endpoint)
    s3_proxy.short_next(2, keep_bytes=50)  # the footers: pyarrow would say "magic bytes not found"
    stream = ParquetStream(files, filesystem=fs, batch_size=100, retries=3, read_ahead=0)
    s3_proxy.short_next(2, keep_bytes=50)  # now the row groups' column chunks
    assert _ids(stream) == list(range(2 * ROWS))
    assert sum(count for (kind, _), count in s3_proxy.faults.items() if kind == "short") == 4
    dataset = ParquetDataset(files, filesystem=fs, retries=3)
    s3_proxy.short_next(1, keep_bytes=50)
    assert [int(dataset[i]["id"]) for i in (0, 799)] == [0, 799]


def test_a_body_that_keeps_coming_short_ends_in_a_remote_read_error(files, s3_proxy):
    s3_proxy.short_next(100, keep_bytes=50)
    with pytest.raises(RemoteReadError, match=r"do not parse.*cut short on the way") as caught:
        ParquetStream(files, filesystem=pyarrow_s3(s3_proxy.endpoint), batch_size=100, retries=2)
    assert caught.value.attempts == 3 and ".idx" not in str(caught.value)


@pytest.mark.parametrize("fault", ["403", "503"])
@pytest.mark.parametrize("reader", [ParquetStream, ParquetDataset, ArrowStream, ArrowDataset])
def test_a_denied_or_failing_store_while_a_reader_is_built_is_a_remote_read_error(
    s3_server, bucket, s3_proxy, tmp_path, fault, reader
):
    """The stamps (HEAD) pass, the metadata's read (GET) fails: not an ArgumentValueError."""
    if reader in (ArrowStream, ArrowDataset):
        feather.write_feather(pa.table({"id": np.arange(10)}), str(tmp_path / "a.arrow"))
        put_object(s3_server.endpoint, bucket, "f/a.arrow", (tmp_path / "a.arrow").read_bytes())
    else:
        put_object(s3_server.endpoint, bucket, "f/a.parquet", _parquet(0))
    if fault == "403":
        s3_proxy.deny("f/a.", 403, methods=frozenset({"GET"}))
    else:
        s3_proxy.error_rate = 1.0
    with pytest.raises(RemoteReadError, match=r"f/a\.") as caught:
        reader(f"{bucket}/f", filesystem=pyarrow_s3(s3_proxy.endpoint), retries=1)
    # A 403 is not repeated, except where pyarrow loses its status: the error body does not fit
    # the buffer of a short ranged read (an Arrow header), "Failed to flush response stream".
    assert caught.value.attempts == 2 if fault == "503" else caught.value.attempts <= 2


# --- the cache folder -----------------------------------------------------------------------


def test_an_empty_cache_dir_is_refused(files, s3_proxy):
    with pytest.raises(ArgumentValueError, match=r"`cache_dir` is an empty string"):
        ParquetStream(files, filesystem=pyarrow_s3(s3_proxy.endpoint), cache_dir="")


def test_a_cache_folder_deleted_while_reading_is_made_again(files, s3_proxy, tmp_path):
    cache = tmp_path / "cache"
    fs = pyarrow_s3(s3_proxy.endpoint)
    stream = ParquetStream(files, filesystem=fs, batch_size=100, cache_dir=str(cache), read_ahead=0)
    epoch = iter(stream)
    first = [int(i) for i in next(epoch).batch["id"]]
    shutil.rmtree(cache)  # part-0 is open already; part-1 is fetched into a folder that is gone
    assert first + [int(i) for batch in epoch for i in batch.batch["id"]] == list(range(2 * ROWS))
    assert any(name.endswith("part-1.parquet") for name in os.listdir(cache))


_FULL_DISK = """
import sys
sys.path.insert(0, {root!r})
from dataloader import CacheError, ParquetStream
from tests.remote.s3 import pyarrow_s3
try:
    list(ParquetStream({remote!r}, filesystem=pyarrow_s3({endpoint!r}), batch_size=100, cache_dir={cache!r}))
except CacheError as error:
    print("CacheError", error.directory, error)
"""


def test_a_full_cache_disk_is_a_cache_error_naming_the_folder(s3_server, bucket, s3_proxy, tmp_path):
    """A real ENOSPC: the cache on a tmpfs of 64 KiB, mounted in a mount namespace of its own."""
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare(1)")
    put_object(s3_server.endpoint, bucket, "big/part-0.parquet", _parquet(0, rows=40_000))  # 320 KB
    cache = tmp_path / "cache"
    cache.mkdir()
    code = _FULL_DISK.format(root=os.getcwd(), remote=f"{bucket}/big", endpoint=s3_proxy.endpoint, cache=str(cache))
    script = f"mount -t tmpfs -o size=64k tmpfs {cache} && exec {sys.executable} -c \"$0\""
    command = ["unshare", "-rm", "--propagation", "private", "sh", "-c", script, code]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, env={**os.environ, **CLIENT_ENV})
    if "mount" in done.stderr and done.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    assert done.stdout.startswith(f"CacheError {cache} "), done.stdout + done.stderr
    assert "is full" in done.stdout and "cache_limit=" in done.stdout and "remote file is fine" in done.stdout
    assert not os.listdir(cache)  # the namespace's tmpfs is gone with it; nothing was left here


def test_a_file_that_ends_before_its_size_while_cached_is_an_error_not_a_hang(tmp_path):
    """A file whose reads run dry before the size it had when opened (cut or replaced mid-fetch):
    the fetch stops with SourceChangedError rather than asking for the same bytes for ever."""
    import io

    import pyarrow.fs as pafs

    from dataloader._remote import ShardCache

    class _Cut(io.RawIOBase):  # says 10 bytes at open, holds 3: what a file cut mid-fetch reads as
        pos = 0

        def readable(self) -> bool:
            return True

        def seekable(self) -> bool:
            return True

        def seek(self, offset: int, whence: int = 0) -> int:
            self.pos = {0: offset, 1: self.pos + offset, 2: 10 + offset}[whence]
            return self.pos

        def readinto(self, buffer) -> int:
            data = b"abc"[self.pos : self.pos + len(buffer)]
            buffer[: len(data)] = data
            self.pos += len(data)
            return len(data)

    class _Handler(pafs.FSSpecHandler):
        def open_input_file(self, path: str):
            return pa.PythonFile(_Cut(), mode="r")

    cache = ShardCache(tmp_path / "cache")
    filesystem = pafs.PyFileSystem(_Handler(MemoryFileSystem()))
    with pytest.raises(SourceChangedError, match="ended at byte 3 while being cached, though it was 10 bytes"):
        cache.fetch(filesystem, "/bucket/a.parquet", 10, [1, None])
    assert not [name for name in os.listdir(cache.directory) if ".part-" in name]  # no partial copy left
