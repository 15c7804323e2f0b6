"""A gs:// URI to a store that cannot be reached fails within seconds (pyarrow's GCS client
otherwise retries a request for 15 minutes). No network: the endpoint is a closed loopback port."""

from __future__ import annotations

import socket

import pytest

from dataloader._cli._convert_checks import check_dest
from dataloader._remote import filesystems
from dataloader.errors import ArgumentValueError


def _closed_port_uri(tail: str = "") -> str:
    with socket.socket() as probe:  # a port nothing listens on once closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"gs://bucket/x?scheme=http&endpoint_override=127.0.0.1:{port}{tail}"


@pytest.fixture
def one_second(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(filesystems, "GCS_RETRY_SECONDS", 1)


def test_a_gcs_request_to_an_unreachable_store_gives_up(one_second):
    fs, path = filesystems.from_uri(_closed_port_uri())
    with pytest.raises(OSError, match="Retry policy exhausted"):  # before: retried for 15 minutes
        fs.get_file_info(path)


def test_convert_to_an_unreachable_gcs_bucket_is_a_one_line_refusal(one_second, tmp_path):
    with pytest.raises(ArgumentValueError, match="gs://bucket/x"):
        check_dest(str(tmp_path), _closed_port_uri(), overwrite=False)


def test_a_uri_keeps_its_own_retry_limit_and_other_schemes_are_untouched():
    given = _closed_port_uri("&retry_limit_seconds=3")
    assert filesystems._bounded_retries(given) == given
    assert filesystems._bounded_retries("gs://b/k").endswith("?retry_limit_seconds=10")
    assert filesystems._bounded_retries("s3://b/k?region=x") == "s3://b/k?region=x"
