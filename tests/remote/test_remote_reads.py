"""Reading columnar files from a real S3 API: the same rows as from the local disk, through
transient faults, with reads ahead, and from a local cache after the first epoch.

The server is moto's, in a subprocess; the faults come from a proxy in front of it
(tests/remote/_proxy.py). pyarrow's own retries are off (``pyarrow_s3(..., retries=1)``), so
what repeats a failed request here is the library's.
"""

from __future__ import annotations

import collections
import json
import multiprocessing
import os

import numpy as np
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from dataloader import (
    ArrowDataset, DataFileError, DataLoader, ParquetDataset, ParquetStream, RemoteReadError, SequentialSampler,
    SourceChangedError, StreamSampler,
)
from dataloader._remote.retry import remote_error
from tests.harness import as_worker
from tests.remote.s3 import pyarrow_s3, put_object, s3fs_filesystem, upload_tree

# Uneven files: 4 files of 700, 1300, 300 and 2000 rows, row groups of 250 rows.
SIZES = (700, 1300, 300, 2000)
ROWS = sum(SIZES)


def _write_files(folder, sizes=SIZES, group=250) -> None:
    os.makedirs(folder, exist_ok=True)
    start = 0
    for number, size in enumerate(sizes):
        ids = np.arange(start, start + size, dtype=np.int64)
        table = pa.table({"id": ids, "value": np.sin(ids).astype(np.float32), "name": [f"r{i}" for i in ids]})
        pq.write_table(table, os.path.join(folder, f"part-{number}.parquet"), row_group_size=group)
        start += size


@pytest.fixture
def dataset(tmp_path, s3_server, bucket):
    """The files on the local disk and in the bucket (under ``data/``): (local folder, remote prefix)."""
    folder = str(tmp_path / "data")
    _write_files(folder)
    upload_tree(s3_server.endpoint, bucket, folder, prefix="data/")
    return folder, f"{bucket}/data"


def _ids(stream) -> list[int]:
    return [int(i) for batch in stream for i in batch.batch["id"]]


def _gets(proxy) -> int:
    return sum(count for (method, _), count in proxy.requests.items() if method == "GET")


def test_remote_rows_are_the_local_rows(dataset, s3_proxy):
    local, remote = dataset
    fs = pyarrow_s3(s3_proxy.endpoint)
    for rank in range(2):
        options = dict(batch_size=64, shuffle=True, seed=3, shuffle_buffer=100, world_size=2, rank=rank)
        assert _ids(ParquetStream(remote, filesystem=fs, **options)) == _ids(ParquetStream(local, **options))
    assert _gets(s3_proxy) > 0  # the remote stream did read through the proxy


def test_an_fsspec_filesystem_and_its_uris_are_read(dataset, s3_proxy):
    local, remote = dataset
    fs = s3fs_filesystem(s3_proxy.endpoint)
    stream = ParquetStream(f"s3://{remote}", filesystem=fs, batch_size=100)
    assert _ids(stream) == _ids(ParquetStream(local, batch_size=100))
    listed = ParquetStream([f"s3://{remote}/part-{i}.parquet" for i in (2, 0)], filesystem=fs, batch_size=100)
    assert _ids(listed) == list(range(2000, 2300)) + list(range(700))


def test_workers_read_the_remote_files_exactly_once(dataset, s3_proxy):
    local, remote = dataset
    stream = ParquetStream(remote, filesystem=pyarrow_s3(s3_proxy.endpoint), batch_size=50, shuffle=True)
    loader = DataLoader(stream, StreamSampler(), num_workers=2, parallel_stream=True)
    ids = [int(i) for batch in loader for i in batch["id"]]
    assert sorted(ids) == list(range(ROWS))


def test_transient_errors_and_resets_are_retried_to_the_same_rows(dataset, s3_proxy):
    local, remote = dataset
    expected = _ids(ParquetStream(local, batch_size=64, shuffle=True))
    s3_proxy.error_rate = 0.2  # a 503 SlowDown on one GET in five
    s3_proxy.reset_next(3, after_bytes=100)  # and three connections reset after 100 bytes of the body
    stream = ParquetStream(remote, filesystem=pyarrow_s3(s3_proxy.endpoint), batch_size=64, shuffle=True, retries=8)
    assert _ids(stream) == expected
    kinds = {kind for kind, _ in s3_proxy.faults}
    assert {"error", "reset"} <= kinds  # both faults happened, and the epoch is whole anyway


def test_a_store_that_keeps_failing_ends_in_an_error_naming_the_object_and_the_attempts(dataset, s3_proxy):
    _, remote = dataset
    stream = ParquetStream(remote, filesystem=pyarrow_s3(s3_proxy.endpoint), batch_size=64, retries=2)
    s3_proxy.error_rate = 1.0
    with pytest.raises(RemoteReadError) as caught:
        _ids(stream)
    error = caught.value
    assert error.attempts == 3
    assert "part-0.parquet" in str(error) and "3 attempts" in str(error) and "retries=" in str(error)
    # pyarrow reports the 503 as SLOW_DOWN or SERVICE_UNAVAILABLE, by what its buffer held.
    assert any(word in error.cause for word in ("503", "SlowDown", "SLOW_DOWN", "SERVICE_UNAVAILABLE"))


@pytest.mark.parametrize("text, words", [
    ("When getting information for key 'data/x.parquet' in bucket 'test-25407070ba8a4047b469': AWS Error "
     "ACCESS_DENIED during HeadObject operation: No response body.", "refused the request"),
    ("An error occurred (403) when calling the HeadObject operation: Forbidden (bucket run-404)", "refused the request"),
    ("An error occurred (404) when calling the HeadObject operation: Not Found", "no such object"),
    ("AWS Error NO_SUCH_KEY during GetObject operation: The specified key does not exist.", "no such object"),
    ("AWS Error RESOURCE_NOT_FOUND (HTTP status 404) during HeadObject operation", "no such object"),
])
def test_a_refusal_is_told_from_a_missing_object_by_its_status_not_by_a_name_holding_404(text, words):
    """A bucket named test-25407070ba8a4047b469 holds "404": its 403 read as a missing object."""
    error = remote_error(OSError(text), "the information of 'x'", 1, 0.0, transient=False)
    assert words in str(error)


@pytest.mark.parametrize("status, words", [(404, "no such object"), (403, "credentials")])
def test_a_missing_or_denied_object_fails_at_once_naming_it(dataset, s3_proxy, status, words):
    _, remote = dataset
    stream = ParquetStream(remote, filesystem=pyarrow_s3(s3_proxy.endpoint), batch_size=64, retries=5, read_ahead=0)
    s3_proxy.methods = frozenset({"GET", "HEAD"})
    s3_proxy.deny("part-1.parquet", status)
    with pytest.raises(DataFileError) as caught:
        _ids(stream)
    assert "part-1.parquet" in str(caught.value)
    assert words in str(caught.value) or isinstance(caught.value, SourceChangedError) or "gone" in str(caught.value)
    denied = sum(count for (kind, key), count in s3_proxy.faults.items() if "part-1" in key)
    assert denied <= 3  # not retried: the open, and the checks of what changed
    assert getattr(caught.value, "attempts", 1) == 1


def test_reads_ahead_overlap_their_round_trips(dataset, s3_proxy):
    local, remote = dataset
    s3_proxy.latency = 0.05
    stream = ParquetStream(remote, filesystem=pyarrow_s3(s3_proxy.endpoint), batch_size=250, columns=["id"])
    assert _ids(stream) == _ids(ParquetStream(local, batch_size=250, columns=["id"]))
    assert s3_proxy.max_in_flight >= 2  # requests for later row groups went out before earlier ones returned


def test_each_file_costs_one_open_one_stamp_and_one_footer_however_many_threads_read_it(dataset, s3_proxy):
    """The store is asked for a file's size, stamp and footer once per reading process, not once
    per read-ahead thread: on a server that answers few requests a second, that is the rate."""
    local, remote = dataset
    s3_proxy.methods = frozenset({"GET", "HEAD"})
    s3_proxy.latency = 0.01  # threads reach each file together
    stream = ParquetStream(remote, filesystem=pyarrow_s3(s3_proxy.endpoint), batch_size=250, shuffle=True)
    groups = sum(-(-size // 250) for size in SIZES)
    s3_proxy.reset_counters()
    assert sorted(_ids(stream)) == list(range(ROWS))
    kinds = collections.Counter(method for method, _ in s3_proxy.requests.elements())
    assert kinds["GET"] <= groups + len(SIZES)  # a request per row group, a footer per file
    assert kinds["HEAD"] <= 2 * len(SIZES)  # a file's size (its opening), its stamp


def test_the_second_epoch_reads_the_cache_not_the_store(dataset, s3_proxy, tmp_path):
    local, remote = dataset
    cache = str(tmp_path / "cache")
    stream = ParquetStream(remote, filesystem=pyarrow_s3(s3_proxy.endpoint), batch_size=100, cache_dir=cache)
    expected = _ids(ParquetStream(local, batch_size=100))
    assert _ids(stream) == expected
    assert _gets(s3_proxy) >= len(SIZES)
    s3_proxy.reset_counters()
    assert _ids(stream) == expected
    assert sum(s3_proxy.requests.values()) == 0  # not one request: every file came from the cache
    copies = [name for name in os.listdir(cache) if name.endswith(".parquet")]
    assert len(copies) == len(SIZES)


def test_a_truncated_cached_copy_is_fetched_again(dataset, s3_proxy, tmp_path):
    local, remote = dataset
    cache = str(tmp_path / "cache")
    stream = ParquetStream(remote, filesystem=pyarrow_s3(s3_proxy.endpoint), batch_size=100, cache_dir=cache)
    expected = _ids(stream)
    [copy] = [os.path.join(cache, n) for n in os.listdir(cache) if n.endswith("part-3.parquet")]
    with open(copy, "r+b") as file:
        file.truncate(os.path.getsize(copy) // 2)
    s3_proxy.reset_counters()
    assert _ids(stream) == expected
    fetched = {key for (method, key) in s3_proxy.requests if method == "GET"}
    assert any(key.endswith("part-3.parquet") for key in fetched)
    assert not any(key.endswith("part-0.parquet") for key in fetched)  # the whole copies were kept


def test_a_copy_whose_record_lacks_a_field_is_fetched_again(dataset, s3_proxy, tmp_path):
    """A record that is valid JSON of the current version but misses a field (edited by hand,
    written by a tool) makes its copy stale, not a raw KeyError."""
    local, remote = dataset
    cache = str(tmp_path / "cache")
    stream = ParquetStream(remote, filesystem=pyarrow_s3(s3_proxy.endpoint), batch_size=100, cache_dir=cache)
    expected = _ids(stream)
    [record] = [os.path.join(cache, n) for n in os.listdir(cache) if n.endswith("part-2.parquet.json")]
    with open(record) as file:
        fields = json.load(file)
    del fields["crc32"], fields["size"]
    with open(record, "w") as file:
        json.dump(fields, file)
    s3_proxy.reset_counters()
    assert _ids(stream) == expected
    fetched = {key for (method, key) in s3_proxy.requests if method == "GET"}
    assert any(key.endswith("part-2.parquet") for key in fetched)


def test_a_copy_corrupted_in_place_is_fetched_again(dataset, s3_proxy, tmp_path):
    local, remote = dataset
    cache = str(tmp_path / "cache")
    fs = pyarrow_s3(s3_proxy.endpoint)
    expected = _ids(ParquetStream(remote, filesystem=fs, batch_size=100, cache_dir=cache))
    [copy] = [os.path.join(cache, n) for n in os.listdir(cache) if n.endswith("part-1.parquet")]
    status = os.stat(copy)
    with open(copy, "r+b") as file:  # same size, same modification time: only the checksum tells
        file.seek(100)
        file.write(b"\xff" * 64)
    os.utime(copy, ns=(status.st_atime_ns, status.st_mtime_ns))
    code = (
        "import sys; sys.path.insert(0, %r)\n"
        "from dataloader import ParquetStream\nfrom tests.remote.s3 import pyarrow_s3\n"
        "s = ParquetStream(%r, filesystem=pyarrow_s3(%r), batch_size=100, cache_dir=%r)\n"
        "print([int(i) for b in s for i in b.batch['id']] == list(range(%d)))\n"
    ) % (os.getcwd(), remote, s3_proxy.endpoint, cache, ROWS)
    import subprocess
    import sys

    # A new process (a new run): it checks each copy's checksum once before trusting it.
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=os.getcwd())
    assert done.stdout.strip() == "True", done.stderr
    assert expected == list(range(ROWS))


def test_the_cache_stays_within_its_limit_dropping_the_least_recently_used(dataset, s3_proxy, tmp_path):
    local, remote = dataset
    cache = str(tmp_path / "cache")
    sizes = sorted(os.path.getsize(os.path.join(local, n)) for n in os.listdir(local))
    limit = sizes[-1] + sizes[-2]  # room for the two largest files, not for all four
    stream = ParquetStream(
        remote, filesystem=pyarrow_s3(s3_proxy.endpoint), batch_size=100, cache_dir=cache, cache_limit=limit
    )
    expected = _ids(ParquetStream(local, batch_size=100))
    for _ in range(2):
        assert _ids(stream) == expected
        held = sum(os.path.getsize(os.path.join(cache, n)) for n in os.listdir(cache) if n.endswith(".parquet"))
        assert 0 < held <= limit
    # The last file read is the most recently used: it is kept.
    assert any(n.endswith("part-3.parquet") for n in os.listdir(cache))


def _read_all(remote, endpoint, cache, ready, go, results):
    stream = ParquetStream(remote, filesystem=pyarrow_s3(endpoint), batch_size=100, cache_dir=cache)
    ready.wait()  # both processes built; fetch together
    go.wait()
    results.put(sorted(int(i) for batch in stream for i in batch.batch["id"]))


def test_processes_sharing_a_cache_fetch_each_file_once(dataset, s3_proxy, tmp_path):
    _, remote = dataset
    cache = str(tmp_path / "cache")
    context = multiprocessing.get_context("spawn")
    ready, go, results = context.Barrier(3), context.Barrier(3), context.Queue()
    processes = [
        context.Process(target=_read_all, args=(remote, s3_proxy.endpoint, cache, ready, go, results))
        for _ in range(2)
    ]
    for process in processes:
        process.start()
    ready.wait(timeout=120)
    s3_proxy.reset_counters()
    go.wait(timeout=120)
    got = [results.get(timeout=120) for _ in processes]
    for process in processes:
        process.join(timeout=60)
    assert got == [list(range(ROWS))] * 2
    per_object = {key: count for (method, key), count in s3_proxy.requests.items() if method == "GET"}
    assert sorted(per_object) == sorted(f"data/part-{i}.parquet" for i in range(len(SIZES)))
    assert set(per_object.values()) == {1}  # one whole-file fetch each, for both processes


def test_a_remote_file_replaced_after_the_build_is_an_error(dataset, s3_server, s3_proxy, tmp_path):
    local, remote = dataset
    bucket = remote.split("/")[0]
    for cache in (None, str(tmp_path / "cache")):
        stream = ParquetStream(remote, filesystem=pyarrow_s3(s3_proxy.endpoint), batch_size=100, cache_dir=cache)
        sink = pa.BufferOutputStream()
        pq.write_table(pa.table({"id": np.arange(5, dtype=np.int64), "value": np.zeros(5, np.float32),
                                 "name": ["x"] * 5}), sink)
        original = open(os.path.join(local, "part-2.parquet"), "rb").read()
        put_object(s3_server.endpoint, bucket, "data/part-2.parquet", sink.getvalue().to_pybytes())
        try:
            with pytest.raises(SourceChangedError, match="part-2.parquet"):
                _ids(stream)
        finally:
            put_object(s3_server.endpoint, bucket, "data/part-2.parquet", original)


def test_map_datasets_read_remote_files_through_the_cache(dataset, s3_proxy, tmp_path):
    local, remote = dataset
    fs = pyarrow_s3(s3_proxy.endpoint)
    cache = str(tmp_path / "cache")
    parquet = ParquetDataset(remote, filesystem=fs, cache_dir=cache)
    indices = [5, ROWS - 1, 1000, 2100]
    assert [int(parquet[i]["id"]) for i in indices] == indices
    loader = DataLoader(parquet, SequentialSampler(parquet, batch_size=500), num_workers=2)
    assert [int(i) for batch in loader for i in batch["id"]] == list(range(ROWS))
    arrow_folder = tmp_path / "arrow"
    arrow_folder.mkdir()
    feather.write_feather(pa.table({"id": np.arange(100, dtype=np.int64)}), str(arrow_folder / "a.arrow"))
    upload_tree(s3_proxy.endpoint, remote.split("/")[0], str(arrow_folder), prefix="arrow/")
    arrow = ArrowDataset(f"{remote.split('/')[0]}/arrow", filesystem=fs, cache_dir=cache)
    assert [int(arrow[i]["id"]) for i in range(100)] == list(range(100))


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck), phases=[Phase.generate])
@given(
    world=st.integers(1, 3), workers=st.integers(1, 3), batch=st.sampled_from([7, 64, 300]),
    shuffle=st.booleans(), window=st.sampled_from([0, 50]), stop=st.floats(0, 1), data=st.data(),
)
def test_remote_and_local_give_the_same_batches_and_resume_alike(
    dataset, s3_proxy, world, workers, batch, shuffle, window, stop, data
):
    """Each shard (rank x worker) of a remote stream, read whole or resumed at a random point, is
    the local one's; together the shards hold every row once."""
    local, remote = dataset
    fs = pyarrow_s3(s3_proxy.endpoint)
    seen = []
    for rank in range(world):
        options = dict(batch_size=batch, shuffle=shuffle, seed=5, shuffle_buffer=window, world_size=world, rank=rank)
        for worker in range(workers):
            with as_worker(worker, workers):
                here = _ids(ParquetStream(local, **options))
                stream = ParquetStream(remote, filesystem=fs, **options)
                assert _ids(stream) == here
                seen += here
                cut = int(stop * len(here)) // batch * batch
                stream.set_epoch(0)
                first = iter(stream)
                taken = []
                while len(taken) < cut:
                    taken += [int(i) for i in next(first).batch["id"]]
                state = stream.state_dict()
                resumed = ParquetStream(remote, filesystem=fs, **options)
                resumed.set_epoch(0)
                resumed.load_state_dict(state)
                assert taken + _ids(resumed) == here
    assert sorted(seen) == list(range(ROWS))


def test_a_cut_body_reads_as_the_fill_never_as_another_files_bytes(s3_server, s3_proxy, bucket):
    """pyarrow's S3 takes a short body's Content-Length at its word and hands over its buffer
    whole: the missing bytes were what the allocator's memory last held, here the file read just
    before (CI once scanned 22 samples of part-00002.tar as part-00000.tar's from a cut copy). The
    library's reads land in a fill that the formats' checks catch as a cut."""
    from dataloader._remote.retry import RetryPolicy
    from dataloader._remote.retrying_fs import CUT_FILL, retrying

    size, kept = 256 * 1024, 1000
    real = np.random.default_rng(0).integers(1, 256, size, dtype=np.uint8).tobytes()  # no zeros
    put_object(s3_server.endpoint, bucket, "blob.bin", real)
    put_object(s3_server.endpoint, bucket, "other.bin", b"\xab" * size)
    filesystem = retrying(pyarrow_s3(s3_proxy.endpoint), RetryPolicy(retries=0))
    with filesystem.open_input_file(f"{bucket}/blob.bin") as file, \
            filesystem.open_input_file(f"{bucket}/other.bin") as other:
        for attempt in range(1, 4):
            assert bytes(other.read_at(size, 0)) == b"\xab" * size  # its buffer, freed
            s3_proxy.short_next(1, keep_bytes=kept)
            data = bytes(file.read_at(size, 0))
            assert s3_proxy.faults[("short", "blob.bin")] == attempt
            assert data[:kept] == real[:kept]
            assert data[kept:] == CUT_FILL * (size - kept)
