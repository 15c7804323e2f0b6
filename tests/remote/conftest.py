"""One moto S3 server for the session, a fresh fault proxy and a fresh bucket for each test."""

from __future__ import annotations

import importlib.util
import uuid
from collections.abc import Iterator

import pytest

from tests.remote.s3 import CLIENT_ENV, FaultProxy, S3Server, S3ServerError, create_bucket

# What moto's standalone S3 server imports (the test extra installs them).
_SERVER_MODULES = ("moto", "flask", "flask_cors", "boto3")


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """moto's S3 server in a subprocess on 127.0.0.1; skips the test if it cannot run."""
    missing = [name for name in _SERVER_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        pytest.skip(f"moto's S3 server cannot run (pip install -e '.[test]'); missing: {', '.join(missing)}")
    try:
        server = S3Server()
    except S3ServerError as error:
        pytest.skip(str(error))
    yield server
    server.stop()


@pytest.fixture
def s3_proxy(s3_server: S3Server) -> Iterator[FaultProxy]:
    """A FaultProxy in front of the session's server, every knob at rest; stopped after the test."""
    with FaultProxy(s3_server.endpoint) as proxy:
        yield proxy


@pytest.fixture
def bucket(s3_server: S3Server) -> str:
    """A new, empty bucket on the session's server (created directly, not through the proxy)."""
    return create_bucket(s3_server.endpoint, f"test-{uuid.uuid4().hex[:20]}")


@pytest.fixture
def s3_env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The AWS environment variables a client that reads its credentials from the environment needs
    (``pyarrow.fs.FileSystem.from_uri``, a worker process), set for this test only."""
    for name, value in CLIENT_ENV.items():
        monkeypatch.setenv(name, value)
    return dict(CLIENT_ENV)
