"""Batches handed out from shared memory stay intact for as long as the user holds them.

Each batch carries the CRC-32 its worker computed over the image bytes it
sent; a segment reused while a view of it is still alive changes the bytes
under the held batch and the CRC no longer matches.
"""

from __future__ import annotations

import logging
import time
import zlib

import numpy as np
import pytest

import dataloader
from tests._workers._fixtures import (
    ChecksumCollator,
    GrowingBatches,
    PatternImages,
    loader_over,
    no_memory_to_grow,
    pattern,
)

BATCH = 16
HELD = 200


def _verify(batch: dict) -> None:
    indices = batch["index"].tolist()
    assert zlib.crc32(batch["image"]) == batch["crc"], f"batch of samples {indices[:2]}... changed"
    expected = np.stack([pattern(i) for i in indices])
    assert np.array_equal(batch["image"], expected), f"batch of samples {indices[:2]}... is wrong"


def _hold_then_run_on(loader, held: int, more: int) -> list:
    """Keep the first ``held`` batches, load ``more`` (dropped at once), close; return the held ones."""
    kept = []
    with iter(loader) as iterator:
        for _ in range(held):
            kept.append(next(iterator))
        for _ in range(more):
            _verify(next(iterator))
    return kept


def test_held_batches_survive_the_loader_running_on_and_closing(no_leaks, start_method):
    dataset = PatternImages(BATCH * (HELD + 100))
    loader = loader_over(dataset, start_method, batch_size=BATCH, collator=ChecksumCollator())

    kept = _hold_then_run_on(loader, HELD, 100)  # the iterator is closed on return

    assert [int(b["index"][0]) for b in kept] == [BATCH * i for i in range(HELD)]
    for batch in kept:
        _verify(batch)


def test_dropped_batches_let_segments_be_reused_without_corrupting_held_ones(no_leaks):
    # Hold every third batch, drop the rest at once: segments are recycled around the held ones.
    dataset = PatternImages(BATCH * 3 * HELD // 2)
    loader = loader_over(dataset, "fork", batch_size=BATCH, collator=ChecksumCollator())
    kept = [batch for i, batch in enumerate(loader) if i % 3 == 0]

    assert len(kept) == HELD // 2
    for batch in kept:
        _verify(batch)


@pytest.mark.timeout(120)
def test_a_small_shm_budget_falls_back_to_the_pipe_instead_of_deadlocking(no_leaks, caplog):
    # 8 MiB between 2 workers holds a few dozen 192 KiB batches; the user holds 200.
    dataset = PatternImages(BATCH * (HELD + 20))
    loader = loader_over(
        dataset, "fork", batch_size=BATCH, collator=ChecksumCollator(), shm_budget=8 * 2**20, timeout=20
    )

    with caplog.at_level(logging.WARNING, logger="dataloader"):
        started = time.monotonic()
        kept = _hold_then_run_on(loader, HELD, 20)
        elapsed = time.monotonic() - started

    for batch in kept:
        _verify(batch)
    warnings = [r for r in caplog.records if r.name == "dataloader" and r.levelno == logging.WARNING]
    assert warnings, "holding more batches than the budget fits should log a warning"
    assert any("shm_budget" in r.getMessage() for r in warnings), [r.getMessage() for r in warnings]
    assert elapsed < 20  # about a second of work; a wait for room would have hit the timeout


def test_no_memory_for_a_bigger_batch_is_a_clear_error_not_a_sigbus(no_leaks, start_method):
    loader = loader_over(GrowingBatches(), start_method, num_workers=1, worker_init_fn=no_memory_to_grow,
                         timeout=20)
    with pytest.raises(dataloader.SharedMemoryError) as info:
        for _ in loader:
            pass
    message = str(info.value)
    assert isinstance(info.value, dataloader.WorkerError)
    assert "cannot reserve" in message and "shared memory for a batch" in message, message
    assert "lower shm_budget, the batch size, prefetch_factor or num_workers" in message, message
    assert "DataLoader worker process 0" in message, message
