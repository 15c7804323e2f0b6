"""An address-space limit (``ulimit -v``, ``RLIMIT_AS``): a segment that cannot be mapped.

Mapping a segment failed with a bare ``OSError: [Errno 12] cannot map a shared segment``
in the transport stage, where a shortage of descriptors already sent the batch through the
pipe. Now a failed mapping takes the same fall-back with a one-time warning naming the limit,
and where no memory is left for that copy either, the batch fails with a
:class:`~dataloader.errors.ResourceLimitError` naming ``RLIMIT_AS`` and the fix.
"""

from __future__ import annotations

import errno
import os
import resource
import sysconfig

import numpy as np
import pytest

from dataloader import ResourceLimitError
from dataloader._transport import arena, codec, mapping

from ._address_scripts import run
from ._helpers import LocalWorker, send_without_segments

KiB, MiB = 2**10, 2**20


def _no_address_space(fd: int, size: int) -> memoryview:
    raise OSError(errno.ENOMEM, os.strerror(errno.ENOMEM))


@pytest.fixture
def worker(no_leaks):
    local = LocalWorker(512 * MiB)
    yield local
    local.close()


def test_a_segment_that_cannot_be_mapped_sends_its_batch_inline_and_says_why(worker, monkeypatch, caplog):
    monkeypatch.setattr(arena, "map_shared", _no_address_space)
    warnings = send_without_segments(worker, caplog)
    assert worker.created == [], "a segment was announced that no one could map"
    assert len(warnings) == 1, warnings
    assert "cannot map a shared-memory segment" in warnings[0]
    assert "RLIMIT_AS" in warnings[0] and "ulimit -v" in warnings[0]


def test_only_a_lack_of_address_space_is_taken_for_it(worker, monkeypatch):
    def broken(fd: int, size: int) -> memoryview:
        raise OSError(errno.EINVAL, "broken")

    monkeypatch.setattr(arena, "map_shared", broken)
    with pytest.raises(OSError, match="broken"):
        worker.pool.acquire(MiB)


def _limited(monkeypatch: pytest.MonkeyPatch) -> None:
    """An address-space limit, as ``resource.getrlimit`` reports it (nothing is lowered)."""
    real = resource.getrlimit

    def getrlimit(which: int) -> tuple[int, int]:
        return (512 * MiB, real(which)[1]) if which == resource.RLIMIT_AS else real(which)

    monkeypatch.setattr(mapping.resource, "getrlimit", getrlimit)


def test_no_memory_for_the_inline_copy_is_the_limits_error(monkeypatch):
    def no_memory(raw: memoryview) -> bytearray:
        raise MemoryError

    _limited(monkeypatch)
    monkeypatch.setattr(codec, "bytearray", no_memory, raising=False)
    with pytest.raises(ResourceLimitError, match=r"RLIMIT_AS, ulimit -v\) of 512 MiB") as info:
        codec.inline(b"meta", [memoryview(bytes(3 * MiB))])
    assert "no room for a batch of 3.0 MiB" in str(info.value)
    assert isinstance(info.value.__cause__, MemoryError)


def test_without_a_limit_no_memory_stays_a_memory_error(monkeypatch):
    def no_memory(raw: memoryview) -> bytearray:
        raise MemoryError

    if resource.getrlimit(resource.RLIMIT_AS)[0] != resource.RLIM_INFINITY:
        pytest.skip("this process runs under an address-space limit")
    monkeypatch.setattr(codec, "bytearray", no_memory, raising=False)
    with pytest.raises(MemoryError):
        codec.inline(b"meta", [memoryview(bytes(KiB))])


# -- whole loaders (child scripts) ---------------------------------------------------------


def test_a_worker_that_cannot_map_segments_delivers_every_batch_through_the_pipe(no_leaks):
    seen, stderr = run("unmappable", "-")
    assert seen == {"error": None, "batches": 3}, seen
    assert stderr.count("cannot map a shared-memory segment") == 1, stderr


@pytest.mark.skipif(
    bool(sysconfig.get_config_var("Py_GIL_DISABLED")),
    reason="free-threaded CPython allocates from mimalloc arenas reserved ahead, so a limit set at "
    "the process's size now plus part of a batch still leaves room for the copy this test refuses",
)
@pytest.mark.parametrize("share", [0.5, 1.1], ids=["no-room-to-copy", "no-room-to-send"])
def test_under_ulimit_v_a_batch_too_large_to_map_is_a_typed_error(no_leaks, share):
    """The limit leaves less than the batch's segment (1.25 x the batch) and, beside the batch,
    less than the copy the pipe needs (0.5: copying it fails; 1.1: pickling that copy does)."""
    seen, stderr = run("limited", share)
    assert seen["error"] == "ResourceLimitError", seen
    assert {"WorkerError", "DataLoaderError", "OSError"} <= set(seen["mro"]), seen
    message = seen["message"]
    assert "no room for a batch of 64.0 MiB" in message and "RLIMIT_AS, ulimit -v" in message
    assert "ulimit -v unlimited" in message and "smaller batches" in message
    assert "cannot map a shared-memory segment" in stderr and "RLIMIT_AS" in stderr
