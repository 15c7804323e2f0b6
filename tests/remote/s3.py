"""A real S3 API on the loopback interface, the clients that read it, and upload helpers.

:class:`S3Server` runs moto's standalone server in a subprocess; :class:`FaultProxy` (from
``_proxy.py``) sits in front of it to add latency and faults. Clients get their credentials
explicitly: nothing here changes ``os.environ``. Plain Python (no pytest): benchmarks import it.
"""

from __future__ import annotations

import functools
import http.client
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tests.remote._proxy import FaultProxy, ProxiedRequest

__all__ = [
    "CLIENT_ENV", "CREDENTIALS", "FaultProxy", "ProxiedRequest", "REGION", "S3Server", "S3ServerError", "create_bucket",
    "delete_object", "pyarrow_s3", "put_object", "s3fs_filesystem", "upload_file", "upload_tree",
]

REGION = "us-east-1"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
# The environment of a client that takes its credentials from there (a child process, a filesystem
# made from a URI): the credentials, the region, and no lookup of the EC2 metadata service, which
# the AWS SDK may try when it lacks them (unreachable offline).
CLIENT_ENV = {**CREDENTIALS, "AWS_DEFAULT_REGION": REGION, "AWS_EC2_METADATA_DISABLED": "true"}
_START_TIMEOUT = 30.0
_TIMEOUT = 5  # seconds: clients' connect and request timeouts


class S3ServerError(RuntimeError):
    """moto's server did not start."""


class S3Server:
    """moto's S3 server in a subprocess on 127.0.0.1 (a free port); ``endpoint`` is its URL."""

    def __init__(self, start_timeout: float = _START_TIMEOUT) -> None:
        self._log = tempfile.TemporaryFile()
        port = _free_port()
        self.endpoint = f"http://127.0.0.1:{port}"
        self.process = subprocess.Popen(
            _server_command(port),
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
            env={**os.environ, **CLIENT_ENV},
        )
        try:
            self._wait_ready(port, start_timeout)
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self, port: int, timeout: float) -> None:
        """Until the server answers an S3 request; raise S3ServerError if it exits or stays silent."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=_TIMEOUT)
                connection.request("GET", "/")  # ListBuckets
                status = connection.getresponse().status
                connection.close()
                if status == 200:
                    return
            except OSError:
                pass
            try:  # the pause between attempts is also the check that the server still runs
                code = self.process.wait(timeout=0.1)
                raise S3ServerError(f"moto's S3 server exited with code {code}: {self.output()[-2000:]}")
            except subprocess.TimeoutExpired:
                pass
        raise S3ServerError(f"moto's S3 server did not answer within {timeout:.0f} s: {self.output()[-2000:]}")

    def output(self) -> str:
        """What the server printed so far."""
        self._log.seek(0)
        return self._log.read().decode("utf-8", "replace")

    def stop(self) -> None:
        """Terminate the server and wait for it (killed if it does not exit within 10 s)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()

    def __enter__(self) -> S3Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _server_command(port: int) -> list[str]:
    return [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@functools.lru_cache(maxsize=None)
def _client(endpoint: str) -> Any:
    """A boto3 S3 client of ``endpoint`` (clients are thread-safe, and slow to make)."""
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3", endpoint_url=endpoint, region_name=REGION, aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        config=Config(s3={"addressing_style": "path"}, retries={"total_max_attempts": 1}),
    )


def create_bucket(endpoint: str, name: str) -> str:
    _client(endpoint).create_bucket(Bucket=name)
    return name


def put_object(endpoint: str, bucket: str, key: str, data: bytes) -> None:
    _client(endpoint).put_object(Bucket=bucket, Key=key, Body=data)


def upload_file(endpoint: str, bucket: str, key: str, path: str | os.PathLike[str]) -> None:
    put_object(endpoint, bucket, key, Path(path).read_bytes())


def upload_tree(endpoint: str, bucket: str, local_dir: str | os.PathLike[str], prefix: str = "") -> list[str]:
    """Every file under ``local_dir`` as an object keyed ``prefix`` + its relative path; the keys, sorted."""
    root = Path(local_dir)
    keys = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        key = prefix + path.relative_to(root).as_posix()
        upload_file(endpoint, bucket, key, path)
        keys.append(key)
    return keys


def delete_object(endpoint: str, bucket: str, key: str) -> None:
    _client(endpoint).delete_object(Bucket=bucket, Key=key)


def pyarrow_s3(endpoint: str, retries: int = 1, timeout: float = _TIMEOUT) -> Any:
    """``pyarrow.fs.S3FileSystem`` of ``endpoint``. ``retries``: attempts per request (1: none, so
    that a test sees the library's retries, not pyarrow's); ``timeout``: seconds to connect, and
    without a byte received."""
    from pyarrow import fs

    return fs.S3FileSystem(
        access_key=CREDENTIALS["AWS_ACCESS_KEY_ID"], secret_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        region=REGION, scheme="http", endpoint_override=urlsplit(endpoint).netloc,
        retry_strategy=fs.AwsStandardS3RetryStrategy(max_attempts=retries),
        connect_timeout=timeout, request_timeout=timeout,
    )


def s3fs_filesystem(endpoint: str, retries: int = 1, timeout: float = _TIMEOUT) -> Any:
    """``s3fs.S3FileSystem`` of ``endpoint``, uncached (a rewritten object is seen); ``retries`` and
    ``timeout`` as in :func:`pyarrow_s3` (``retries`` caps botocore's attempts and s3fs's own)."""
    import s3fs

    filesystem = s3fs.S3FileSystem(
        key=CREDENTIALS["AWS_ACCESS_KEY_ID"], secret=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        client_kwargs={"endpoint_url": endpoint, "region_name": REGION},
        config_kwargs={
            "retries": {"total_max_attempts": retries, "mode": "standard"}, "s3": {"addressing_style": "path"},
            "connect_timeout": timeout, "read_timeout": timeout,
        },
        skip_instance_cache=True, use_listings_cache=False,
    )
    filesystem.retries = retries  # s3fs's own loop around botocore (a class attribute, 5)
    return filesystem
