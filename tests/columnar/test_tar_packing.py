"""Pre-tokenized WebDataset shards, packed: a ``TarStream`` of ``.npy`` token arrays (written by
``write_tar_shards``) decoded and packed by ``PackedStream`` in a ``DataLoader`` with worker
processes: every token once, the same rows for 0 and 2 workers, an exact resume mid-epoch."""

from __future__ import annotations

import io

import numpy as np

from dataloader import DataLoader, PackedStream, StreamSampler, TarStream, write_tar_shards

STEP = 10_000


def _npy(data: bytes) -> np.ndarray:
    return np.load(io.BytesIO(data))


def _loader(folder, workers: int) -> DataLoader:
    stream = TarStream(folder, decode={"npy": _npy}, shuffle=True, seed=2)
    packed = PackedStream(stream, seq_len=256, fields=["npy"], method="first_fit", buffer_size=3)
    return DataLoader(packed, StreamSampler(batch_size=2), num_workers=workers)


def test_npy_token_shards_pack_every_token_once_and_resume(tmp_path):
    lengths = np.random.default_rng(4).integers(1, 600, 120).tolist()
    samples = [{"npy": (np.arange(n) + number * STEP).astype(np.int32), "cls": number} for number, n in enumerate(lengths)]
    write_tar_shards(samples, tmp_path / "shards", samples_per_shard=30)

    whole = [{k: v.copy() for k, v in b.items()} for b in _loader(tmp_path / "shards", 2)]
    assert set(whole[0]) == {"npy", "npy_segment_ids", "npy_positions"}  # __key__ and cls left out
    real = np.concatenate([b["npy"][b["npy_segment_ids"] > 0] for b in whole])
    expected = np.concatenate([np.arange(n) + number * STEP for number, n in enumerate(lengths)])
    assert real.dtype == np.int32 and np.array_equal(np.sort(real), expected)
    serial = list(_loader(tmp_path / "shards", 0))
    assert all(np.array_equal(a[k], b[k]) for a, b in zip(whole, serial) for k in a) and len(serial) == len(whole)

    first = _loader(tmp_path / "shards", 2)
    with iter(first) as batches:
        head = [next(batches)["npy"].copy() for _ in range(7)]
        state = first.state_dict()
    resumed = _loader(tmp_path / "shards", 2)
    resumed.load_state_dict(state)
    rows = head + [b["npy"] for b in resumed]
    assert len(rows) == len(whole) and all(np.array_equal(a, b["npy"]) for a, b in zip(rows, whole))
