"""Pre-tokenized data from object storage, packed: a Parquet ``list<int32>`` column of tokens in a
bucket of a real S3 API (moto's server), read by ``ParquetStream`` and packed by ``PackedStream``
in a ``DataLoader`` with worker processes: every token once, and an exact resume mid-epoch."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dataloader import DataLoader, PackedStream, ParquetStream, StreamSampler
from tests.remote.s3 import pyarrow_s3, upload_tree

DOCS = 300
STEP = 10_000  # token = document number * STEP + position in the document


def _write(folder) -> list[int]:
    lengths = np.random.default_rng(3).lognormal(4.0, 1.0, DOCS).astype(int).clip(1, 2000).tolist()
    tokens = [np.arange(n, dtype=np.int32) + number * STEP for number, n in enumerate(lengths)]
    folder.mkdir()
    for part in range(3):
        chunk = slice(part * 100, part * 100 + 100)
        table = pa.table({"ids": pa.array(tokens[chunk], type=pa.list_(pa.int32())), "doc": list(range(DOCS))[chunk]})
        pq.write_table(table, folder / f"part-{part}.parquet", row_group_size=25)
    return lengths


def _int32(row):
    return {"ids": np.asarray(row["ids"], dtype=np.int32)}


def _loader(prefix, endpoint) -> DataLoader:
    stream = ParquetStream(prefix, filesystem=pyarrow_s3(endpoint), columns=["ids"], shuffle=True, seed=1)
    packed = PackedStream(stream, seq_len=512, transform=_int32, buffer_size=4)
    return DataLoader(packed, StreamSampler(batch_size=3), num_workers=2)


def _rows(batches) -> list[np.ndarray]:
    return [row for batch in batches for row in batch["ids"]]


def test_a_parquet_token_column_in_a_bucket_packs_every_token_once_and_resumes(tmp_path, s3_server, bucket):
    lengths = _write(tmp_path / "tokens")
    upload_tree(s3_server.endpoint, bucket, str(tmp_path / "tokens"), prefix="tokens/")
    prefix = f"{bucket}/tokens"

    whole = [{k: v.copy() for k, v in b.items()} for b in _loader(prefix, s3_server.endpoint)]
    assert all(b["ids"].dtype == np.int32 and b["ids"].shape[1] == 512 for b in whole)
    real = np.concatenate([b["ids"][b["ids_segment_ids"] > 0] for b in whole])
    expected = np.concatenate([np.arange(n) + number * STEP for number, n in enumerate(lengths)])
    assert np.array_equal(np.sort(real), np.sort(expected))  # every token once, none made up

    first = _loader(prefix, s3_server.endpoint)
    with iter(first) as batches:
        head = [next(batches)["ids"].copy() for _ in range(5)]
        state = first.state_dict()
    resumed = _loader(prefix, s3_server.endpoint)
    resumed.load_state_dict(state)
    rest = _rows(resumed)
    assert all(np.array_equal(a, b) for a, b in zip(_rows([{"ids": h} for h in head]) + rest, _rows(whole)))
    assert len(_rows([{"ids": h} for h in head])) + len(rest) == len(_rows(whole))
