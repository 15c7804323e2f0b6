"""The S3 test infrastructure does what it says, seen by real clients (pyarrow's S3FileSystem, s3fs).

Timing assertions are lower bounds only; concurrency is shown by what the proxy counts (requests
in flight at once), not by how long a run took.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import sys
import threading
import time

import psutil
import pytest
from pyarrow import fs as pafs

from tests.remote import s3 as s3_module
from tests.remote.s3 import (
    FaultProxy, ProxiedRequest, S3Server, S3ServerError, delete_object, pyarrow_s3, put_object, s3fs_filesystem,
    upload_tree,
)

DATA = os.urandom(300_000)  # several proxy chunks: a reset cuts a body midway


@pytest.fixture
def uploaded(s3_server: S3Server, bucket: str) -> str:
    """``bucket`` with DATA under the key "data.bin"; returns "bucket/data.bin"."""
    put_object(s3_server.endpoint, bucket, "data.bin", DATA)
    return f"{bucket}/data.bin"


def test_a_tree_round_trips_byte_for_byte_through_the_proxy(s3_server, s3_proxy, bucket, tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "data.bin").write_bytes(DATA)
    (tmp_path / "top.txt").write_bytes(b"top")
    (tmp_path / "empty").write_bytes(b"")
    keys = upload_tree(s3_server.endpoint, bucket, tmp_path, prefix="set/")
    assert keys == ["set/a/b/data.bin", "set/empty", "set/top.txt"]

    arrow = pyarrow_s3(s3_proxy.endpoint)
    listed = arrow.get_file_info(pafs.FileSelector(f"{bucket}/set", recursive=True))
    assert sorted(i.path for i in listed if i.type == pafs.FileType.File) == [f"{bucket}/{k}" for k in keys]
    with arrow.open_input_file(f"{bucket}/set/a/b/data.bin") as remote:
        assert remote.read() == DATA
        assert remote.read_at(1000, 123_456) == DATA[123_456:124_456]
    s3 = s3fs_filesystem(s3_proxy.endpoint)
    assert s3.cat_file(f"{bucket}/set/a/b/data.bin") == DATA
    assert s3.cat_file(f"{bucket}/set/a/b/data.bin", start=299_990, end=300_000) == DATA[-10:]
    assert s3.cat_file(f"{bucket}/set/top.txt") == b"top" and s3.cat_file(f"{bucket}/set/empty") == b""

    ranges = [r.range for r in s3_proxy.log if r.method == "GET" and r.key == "set/a/b/data.bin"]
    assert "bytes=123456-124455" in ranges and "bytes=299990-299999" in ranges


def test_writes_through_the_proxy_reach_the_server(s3_server, s3_proxy, bucket):
    with pyarrow_s3(s3_proxy.endpoint).open_output_stream(f"{bucket}/by-arrow") as out:
        out.write(DATA)
    s3fs_filesystem(s3_proxy.endpoint).pipe_file(f"{bucket}/by-s3fs", DATA[:1000])
    direct = pyarrow_s3(s3_server.endpoint)
    assert direct.open_input_file(f"{bucket}/by-arrow").read() == DATA
    assert direct.open_input_file(f"{bucket}/by-s3fs").read() == DATA[:1000]
    assert s3_proxy.requests[("PUT", "by-s3fs")] == 1


def test_a_rewritten_or_deleted_object_is_seen_as_it_is_now(s3_server, s3_proxy, bucket):
    s3 = s3fs_filesystem(s3_proxy.endpoint)
    put_object(s3_server.endpoint, bucket, "k", b"old")
    assert s3.ls(bucket) == [f"{bucket}/k"] and s3.cat_file(f"{bucket}/k") == b"old"
    put_object(s3_server.endpoint, bucket, "k", b"newer")
    assert s3.info(f"{bucket}/k")["size"] == 5 and s3.cat_file(f"{bucket}/k") == b"newer"
    delete_object(s3_server.endpoint, bucket, "k")
    assert s3.ls(bucket) == [] 
    assert pyarrow_s3(s3_proxy.endpoint).get_file_info(f"{bucket}/k").type == pafs.FileType.NotFound


def test_latency_delays_each_matching_get(s3_proxy, uploaded):
    remote = pyarrow_s3(s3_proxy.endpoint).open_input_file(uploaded)  # a HEAD: not delayed, not counted
    s3_proxy.latency = 0.05
    start = time.monotonic()
    assert remote.read_at(10, 0) == DATA[:10]
    assert time.monotonic() - start >= 0.05
    assert s3_proxy.max_in_flight == 1


def test_concurrent_gets_are_delayed_together_not_one_after_another(s3_proxy, uploaded):
    """Both requests are held by the latency at the same moment, then lowering it lets both go."""
    remote = pyarrow_s3(s3_proxy.endpoint, timeout=120).open_input_file(uploaded)
    s3_proxy.latency = 3600
    got: dict[int, bytes] = {}
    readers = [threading.Thread(target=lambda at=at: got.update({at: remote.read_at(100, at)})) for at in (0, 5000)]
    for reader in readers:
        reader.start()
    try:
        assert s3_proxy.wait_for_in_flight(2, timeout=60), f"in flight: {s3_proxy.in_flight}"
    finally:
        s3_proxy.latency = 0
        for reader in readers:
            reader.join(60)
    assert got == {0: DATA[:100], 5000: DATA[5000:5100]} and s3_proxy.max_in_flight == 2


def test_bandwidth_paces_a_body(s3_proxy, uploaded):
    remote = pyarrow_s3(s3_proxy.endpoint).open_input_file(uploaded)
    s3_proxy.bandwidth = 100_000
    start = time.monotonic()
    assert remote.read_at(20_000, 0) == DATA[:20_000]
    assert time.monotonic() - start >= 0.2


def test_an_injected_error_reaches_the_client_when_its_retries_are_off(s3_proxy, uploaded):
    remote = pyarrow_s3(s3_proxy.endpoint, retries=1).open_input_file(uploaded)
    s3_proxy.error_rate = 1.0
    # pyarrow reads a GET's body into the caller's buffer, error bodies too: it names a 503 by its
    # code (SLOW_DOWN) or, when it cannot parse the body there, by its status (SERVICE_UNAVAILABLE);
    # a read smaller than the error's body gets "INTERNAL_FAILURE ... Failed to flush response
    # stream", which the AWS SDK does not retry.
    with pytest.raises(OSError, match="SLOW_DOWN|SERVICE_UNAVAILABLE"):
        remote.read()
    with pytest.raises(OSError):
        remote.read_at(10, 0)
    key = uploaded.split("/", 1)[1]
    assert s3_proxy.faults == {("error", key): 2} and s3_proxy.requests[("GET", key)] == 2

    s3_proxy.error_status = 500
    with pytest.raises(OSError, match="internal error"):
        s3fs_filesystem(s3_proxy.endpoint).cat_file(uploaded, start=0, end=10)
    assert s3_proxy.faults[("error", key)] == 3


def test_a_client_that_retries_gets_through_a_seeded_error_rate(s3_proxy, uploaded):
    s3_proxy.error_rate = 0.5
    remote = pyarrow_s3(s3_proxy.endpoint, retries=10).open_input_file(uploaded)
    for _ in range(3):  # whole reads: see above for why a small one would not be retried
        assert remote.read_at(len(DATA), 0) == DATA
    errors = s3_proxy.faults[("error", "data.bin")]
    assert 0 < errors and s3_proxy.requests[("GET", "data.bin")] == 3 + errors


def test_reset_next_cuts_a_read_midway(s3_proxy, uploaded):
    remote = pyarrow_s3(s3_proxy.endpoint).open_input_file(uploaded)
    s3_proxy.reset_next(1, after_bytes=70_000)
    with pytest.raises(OSError):
        remote.read_at(len(DATA), 0)
    assert s3_proxy.faults == {("reset", "data.bin"): 1}
    assert remote.read_at(len(DATA), 0) == DATA  # one reset only, then a new connection works

    s3_proxy.reset_next(1, after_bytes=10)
    aiohttp = pytest.importorskip("aiohttp")
    with pytest.raises(aiohttp.ClientPayloadError):  # s3fs lets aiohttp's error through, not an OSError
        s3fs_filesystem(s3_proxy.endpoint).cat_file(uploaded)
    assert s3_proxy.faults == {("reset", "data.bin"): 2}


def test_deny_gives_missing_and_forbidden_objects(s3_server, s3_proxy, bucket):
    for key in ("gone.bin", "secret.bin", "open.bin"):
        put_object(s3_server.endpoint, bucket, key, b"x")
    s3_proxy.deny("gone", 404)
    s3_proxy.deny("secret", 403)
    arrow, s3 = pyarrow_s3(s3_proxy.endpoint), s3fs_filesystem(s3_proxy.endpoint)
    assert arrow.get_file_info(f"{bucket}/gone.bin").type == pafs.FileType.NotFound
    with pytest.raises(FileNotFoundError):
        arrow.open_input_file(f"{bucket}/gone.bin")
    with pytest.raises(OSError, match="ACCESS_DENIED|AccessDenied|403"):
        arrow.open_input_file(f"{bucket}/secret.bin")
    with pytest.raises(FileNotFoundError):
        s3.cat_file(f"{bucket}/gone.bin")
    with pytest.raises(PermissionError):
        s3.cat_file(f"{bucket}/secret.bin")
    assert s3.cat_file(f"{bucket}/open.bin") == b"x"
    s3_proxy.allow()
    assert s3.cat_file(f"{bucket}/gone.bin") == b"x"


def test_the_matching_rules_choose_what_gets_faults(s3_server, s3_proxy, bucket):
    for key in ("a/1", "b/1"):
        put_object(s3_server.endpoint, bucket, key, b"x")
    s3_proxy.key_filter, s3_proxy.error_rate = "a/", 1.0
    arrow = pyarrow_s3(s3_proxy.endpoint)
    assert arrow.open_input_file(f"{bucket}/b/1").read() == b"x"
    with pytest.raises(OSError):
        arrow.open_input_file(f"{bucket}/a/1").read()
    s3_proxy.methods, s3_proxy.key_filter = frozenset({"HEAD"}), ""
    with pytest.raises(OSError):
        arrow.open_input_file(f"{bucket}/b/1")  # its HEAD fails now
    assert set(s3_proxy.faults) == {("error", "a/1"), ("error", "b/1")}
    s3_proxy.reset_counters()
    assert not s3_proxy.requests and not s3_proxy.faults and s3_proxy.log == []


def test_server_and_proxy_leave_nothing_behind(no_leaks):
    with S3Server() as server, FaultProxy(server.endpoint) as proxy:
        pid = server.process.pid
        connection = http.client.HTTPConnection("127.0.0.1", int(proxy.endpoint.rsplit(":", 1)[1]), timeout=30)
        etags = []
        for path, body in (("/kept-bucket", b""), ("/kept-bucket/k", b"abc")):  # on one kept-alive connection
            connection.request("PUT", path, body=body)
            response = connection.getresponse()
            response.read()
            etags.append(response.getheader("ETag"))
            assert response.status == 200, path
        connection.close()
        assert etags[1] == f'"{hashlib.md5(b"abc").hexdigest()}"'  # the body reached the server
        assert proxy.log == [ProxiedRequest("PUT", "", None), ProxiedRequest("PUT", "k", None)]
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


@pytest.mark.parametrize("program, timeout, message", [
    ("print('no such option'); raise SystemExit(2)", 30.0, "exited with code 2: no such option"),
    ("import time; time.sleep(60)", 0.5, "did not answer within"),
])
def test_a_server_that_cannot_start_says_why(monkeypatch, no_leaks, program, timeout, message):
    monkeypatch.setattr(s3_module, "_server_command", lambda port: [sys.executable, "-c", program])
    with pytest.raises(S3ServerError, match=message):
        S3Server(start_timeout=timeout)
