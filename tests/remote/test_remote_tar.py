"""WebDataset tar shards in a real S3 API: the samples of the local shards, by brace pattern and
through fsspec, with and without their indexes, from the cache after one fetch."""

from __future__ import annotations

import collections
import os
import tarfile

import pytest

from dataloader import DataLoader, RemoteReadError, StreamSampler, TarStream, write_tar_shards
from tests.remote.s3 import pyarrow_s3, s3fs_filesystem, upload_tree

SHARDS = 4


@pytest.fixture
def shards(tmp_path, s3_server, bucket):
    """Tar shards of 23 samples each (the last shorter), on the disk and under ``bucket/tars/``."""
    folder = tmp_path / "tars"
    samples = [{"__key__": f"k{i:04d}", "cls": i, "txt": f"sample {i}", "bin": bytes([i % 256]) * (i + 1)}
               for i in range(80)]
    write_tar_shards(samples, folder, samples_per_shard=23)
    upload_tree(s3_server.endpoint, bucket, str(folder), prefix="tars/")
    return str(folder), bucket


def _keys(stream) -> list[str]:
    return [row["__key__"] for row in stream]


def test_remote_shards_by_brace_pattern_give_the_local_samples(shards, s3_proxy):
    local, bucket = shards
    pattern = "tars/part-{00000..00003}.tar"
    options = dict(shuffle=True, seed=2, shuffle_buffer=10)
    expected = list(TarStream(os.path.join(local, "part-{00000..00003}.tar"), **options))
    remote = TarStream(f"{bucket}/{pattern}", filesystem=pyarrow_s3(s3_proxy.endpoint), **options)
    assert list(remote) == expected
    uri = TarStream(f"s3://{bucket}/{pattern}", filesystem=s3fs_filesystem(s3_proxy.endpoint), **options)
    assert _keys(uri) == [row["__key__"] for row in expected]
    first = expected[0]
    assert first["txt"] == f"sample {int(first['cls'])}" and first["__key__"] == f"k{int(first['cls']):04d}"


def test_workers_read_every_remote_sample_once_through_faults(shards, s3_proxy):
    _, bucket = shards
    stream = TarStream(f"{bucket}/tars", filesystem=pyarrow_s3(s3_proxy.endpoint), shuffle=True, retries=10)
    s3_proxy.error_rate = 0.3
    s3_proxy.reset_next(2, after_bytes=50)
    loader = DataLoader(stream, StreamSampler(batch_size=8), num_workers=2, parallel_stream=True)
    labels = sorted(int(i) for batch in loader for i in batch["cls"])
    assert labels == list(range(80))
    assert "reset" in {kind for kind, _ in s3_proxy.faults}


def test_shards_without_indexes_are_scanned_into_the_cache_once(shards, s3_server, s3_proxy, tmp_path):
    local, bucket = shards
    for name in os.listdir(local):
        if name.endswith(".idx"):
            os.remove(os.path.join(local, name))
    upload_tree(s3_server.endpoint, bucket, local, prefix="bare/")  # the shards alone
    cache = str(tmp_path / "cache")
    s3_proxy.reset_counters()
    stream = TarStream(f"{bucket}/bare", filesystem=pyarrow_s3(s3_proxy.endpoint), cache_dir=cache)
    fetched = collections.Counter(key for (method, key) in s3_proxy.requests.elements() if method == "GET")
    shards_fetched = {key for key in fetched if key.endswith(".tar")}
    assert len(shards_fetched) == SHARDS  # the build read each shard whole, once, into the cache
    s3_proxy.reset_counters()
    assert _keys(stream) == _keys(TarStream(local))
    assert not [key for (method, key) in s3_proxy.requests if method == "GET"]  # the epoch read the copies


# --- a body cut short with a Content-Length to match (pyarrow's S3 hands it over as whole) ----


@pytest.mark.parametrize("keep", [50, 700])
def test_a_short_body_while_building_or_reading_is_read_again(shards, s3_proxy, keep):
    """The sidecars, the shards' ends (the index check) and the pieces each come short once."""
    local, bucket = shards
    fs = pyarrow_s3(s3_proxy.endpoint)
    s3_proxy.short_next(3, keep_bytes=keep)
    s3_proxy.reset_counters()
    stream = TarStream(f"{bucket}/tars", filesystem=fs, retries=3, read_ahead=0)
    scans = [r for r in s3_proxy.log if r.method == "GET" and r.key.endswith(".tar") and r.range.startswith("bytes=0-")]
    assert not scans  # a cut sidecar or shard end was read again, not taken for a stale index
    s3_proxy.short_next(3, keep_bytes=keep)  # now the pieces
    assert list(stream) == list(TarStream(local))
    assert sum(count for (kind, _), count in s3_proxy.faults.items() if kind == "short") == 6


def test_a_tar_body_that_keeps_coming_short_ends_in_a_remote_read_error(shards, s3_proxy):
    _, bucket = shards
    fs = pyarrow_s3(s3_proxy.endpoint)
    stream = TarStream(f"{bucket}/tars", filesystem=fs, retries=2, read_ahead=0)
    s3_proxy.short_next(100, keep_bytes=700)
    with pytest.raises(RemoteReadError, match=r"part-0000\d\.tar.*do not parse.*cut short on the way") as caught:
        list(stream)
    assert caught.value.attempts == 3 and ".idx" not in str(caught.value)


def test_a_shard_that_keeps_coming_short_while_building_ends_in_a_remote_read_error(shards, s3_proxy):
    _, bucket = shards
    s3_proxy.short_next(1000, keep_bytes=50)
    with pytest.raises(RemoteReadError, match=r"part-0000\d\.tar.*do not parse") as caught:
        TarStream(f"{bucket}/tars", filesystem=pyarrow_s3(s3_proxy.endpoint), retries=2)
    assert caught.value.attempts == 3 and ".idx" not in str(caught.value)


# --- a cut at a header boundary: the zero-filled tail reads as tar's end-of-archive blocks ----


def _bare(shards, s3_server, bucket) -> tuple[str, int]:
    """The shards without their indexes under ``bucket/bare/``; the offset of sample 1's first
    header in part-00000.tar. A read of that header cut to nothing comes back unfilled: as zeros
    (pyarrow's buffer), tarfile takes it for the end of the archive; as the retrying
    filesystem's 0xff fill, for a bad header where it stops as well."""
    local, _ = shards
    for name in os.listdir(local):
        if name.endswith(".idx"):
            os.remove(os.path.join(local, name))
    upload_tree(s3_server.endpoint, bucket, local, prefix="bare/")
    with tarfile.open(os.path.join(local, "part-00000.tar")) as tar:
        return local, next(m.offset for m in tar if m.name.startswith("k0001."))


@pytest.mark.parametrize("cached", [False, True], ids=["scan", "scan-of-the-cached-copy"])
def test_a_scan_cut_at_a_header_boundary_reads_again_and_loses_no_sample(shards, s3_server, s3_proxy, bucket,
                                                                         tmp_path, cached):
    """A header read (the scan's own, or the copy's fetch) whose body stops exactly at a sample's
    header comes back zero-filled: the scan saw the end of the archive there and silently indexed
    1 of the shard's 23 samples. The bytes after an end marker are read again, and they are not
    zeros: the scan is read again and every sample is there."""
    local, header = _bare(shards, s3_server, bucket)
    s3_proxy.key_filter = "bare/part-00000.tar"
    if cached:  # the copy is fetched in one read from byte 0: cut it at the header
        s3_proxy.short_next(1, keep_bytes=header, at=0)
    else:  # the scan reads the header alone: cut it to nothing
        s3_proxy.short_next(1, keep_bytes=0, at=header)
    options = {"cache_dir": str(tmp_path / "cache")} if cached else {}
    stream = TarStream(f"{bucket}/bare", filesystem=pyarrow_s3(s3_proxy.endpoint), retries=3, **options)
    assert sum(count for (kind, _), count in s3_proxy.faults.items() if kind == "short") == 1
    assert _keys(stream) == _keys(TarStream(local))


def test_a_scan_whose_end_keeps_coming_early_ends_in_a_remote_read_error(shards, s3_server, s3_proxy, bucket):
    _, header = _bare(shards, s3_server, bucket)
    s3_proxy.key_filter = "bare/part-00000.tar"
    s3_proxy.short_next(100, keep_bytes=0, at=header)
    with pytest.raises(RemoteReadError, match=r"part-00000\.tar.*do not parse.*end-of-archive") as caught:
        TarStream(f"{bucket}/bare", filesystem=pyarrow_s3(s3_proxy.endpoint), retries=2)
    assert caught.value.attempts == 3
