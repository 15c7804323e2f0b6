"""Parquet rows whose image does not decode, under on_error="skip" and "replace": the columnar
readers (map and stream, the stream read here or by each worker) lose only those rows."""

from __future__ import annotations

import numpy as np
import pytest

from dataloader import DataLoader, SequentialSampler, StreamSampler

pytest.importorskip("PIL", reason="DecodeImage needs OpenCV or Pillow: pip install 'dataloader[vision]'")

from dataloader.columnar import ParquetDataset, ParquetStream, write_parquet_shards  # noqa: E402
from dataloader.transform.vision import DecodeImage  # noqa: E402
from tests._fixtures_images import png_bytes  # noqa: E402

BAD = {7: "truncated", 33: "truncated", 50: "empty"}
ROWS = 60


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    rng = np.random.default_rng(0)
    images = []
    for row in range(ROWS):
        data = png_bytes(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8))
        images.append({"truncated": data[:10], "empty": b""}.get(BAD.get(row, ""), data))
    folder = tmp_path_factory.mktemp("bad-rows")
    write_parquet_shards({"image": images, "label": list(range(ROWS))}, folder, rows_per_shard=30, row_group_size=10)
    return str(folder)


def _labels(loader):
    return [batch[1].tolist() for batch in loader]


@pytest.mark.parametrize(
    "kind, num_workers",
    [("dataset", 0), ("dataset", 2), ("stream", 0), ("stream", 2), ("parallel_stream", 2)],
)
def test_rows_that_do_not_decode_are_left_out_or_replaced(no_leaks, shards, kind, num_workers):
    for on_error in ("skip", "replace"):
        if kind == "dataset":
            dataset = ParquetDataset(shards)
            sampler = SequentialSampler(dataset, batch_size=8)
        else:
            dataset, sampler = ParquetStream(shards), StreamSampler(8)
        loader = DataLoader(
            dataset, sampler, transform=DecodeImage(fields=("image", "label")), num_workers=num_workers,
            parallel_stream=kind == "parallel_stream", on_error=on_error, max_errors=5,
            multiprocessing_context="fork",
        )
        batches = _labels(loader)
        delivered = sorted(label for batch in batches for label in batch)
        records = loader.stats().failures
        # Under replace a drawn substitute may be a bad row too: it is recorded as skipped.
        failed = [r for r in records if on_error == "skip" or r.action == "replaced"]
        assert len(failed) == 3 and {r.error for r in records} == {"ImageDecodeError"}
        assert {r.stage for r in records} == {"transform"}
        if on_error == "skip":
            assert delivered == sorted(set(range(ROWS)) - set(BAD))
        else:
            assert not set(BAD) & set(delivered) and len(delivered) == ROWS
            if kind != "parallel_stream":  # each worker's shard ends in a short batch of its own
                assert [len(batch) for batch in batches] == [8] * 7 + [4]
        if kind == "dataset":
            assert sorted(r.index for r in failed) == sorted(BAD) and {r.index for r in records} <= set(BAD)
