"""The remote-data bench's contenders: each reads one whole epoch and says how long it took.

A contender's ``run(where)`` builds its reader (untimed apart: ``build_s``), reads one epoch
through a loader with ``workers`` worker processes and returns the :class:`Epoch`. ``where`` is
a :class:`Where`: the local directories, or the bucket behind a proxy of some latency. Our
readers run in ``DataLoader(stream, StreamSampler(...), num_workers=N, parallel_stream=True)``;
WebDataset's in ``torch.utils.data.DataLoader(num_workers=N, batch_size=None)`` over its own
pipeline (``WebDataset(urls).map(decode_crop).batched(32)``), its remote shards opened with
``pipe:curl`` of presigned URLs through the same proxy (moto refuses anonymous GETs).
WebDataset's loader keeps PyTorch's default start method, ``fork``. MosaicML ``streaming`` reads
the same samples as MDS shards (``write_mds``): a ``StreamingDataset`` that decodes and crops in
``__getitem__``, in ``torch.utils.data.DataLoader(batch_size=32, num_workers=N)`` (``fork``);
remote, ``remote="s3://bucket/mds"`` with a fresh empty ``local=`` directory per run and the proxy
as ``S3_ENDPOINT_URL``; local, ``remote=None`` over the MDS directory itself.
"""

from __future__ import annotations

import contextlib
import gc
import importlib.util
import os
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

from dataloader import DataLoader, ParquetStream, StreamSampler, TarStream

from .remote_data import MDS_PREFIX, PARQUET_PREFIX, TAR_PREFIX, Data, DecodeCrop, decode_crop

ROW_BATCH, IMAGE_BATCH = 1024, 32
PARQUET, TAR = "parquet", "tar jpeg"
OURS, WDS, STREAMING = "ours", "webdataset", "streaming"
LOCAL = "local"


@dataclass(frozen=True)
class Where:
    """Where a contender reads: ``endpoint`` None for the local files, else the proxy's URL."""

    data: Data
    bucket: str
    endpoint: str | None = None
    latency_ms: int | None = None

    @property
    def label(self) -> str:
        return LOCAL if self.endpoint is None else f"s3 {self.latency_ms} ms"


@dataclass(frozen=True)
class Epoch:
    rows: int
    build_s: float
    epoch_s: float
    first_s: float  # from iter() to the first batch (worker start-up, first reads)
    first_rows: int  # rows of the first batch


@dataclass(frozen=True)
class Contender:
    workload: str
    reader: str  # OURS, WDS or STREAMING
    mode: str  # "cold" (a fresh reader, no cache) or "cached" (the 2nd epoch over a filled cache_dir)
    run: Callable[[Where, int, str], Epoch]  # (where, workers, start method) -> the timed epoch
    needs: tuple[str, ...] = ()  # modules it cannot run without


def batch_rows(batch: Any) -> int:
    """Rows in a batch: a dict of columns, or an (images, labels) pair."""
    first = next(iter(batch.values())) if isinstance(batch, dict) else batch[-1]
    return len(first)


def _epoch(loader: Any, build: float) -> Epoch:
    rows, start, first_s, first_rows = 0, time.perf_counter(), 0.0, 0
    for batch in loader:
        rows += batch_rows(batch)
        if not first_rows:
            first_s, first_rows = time.perf_counter() - start, rows
    return Epoch(rows, build, time.perf_counter() - start, first_s, first_rows)


def _source(where: Where, prefix: str, local: Any) -> tuple[Any, dict]:
    """``(source, options)`` of our streams: the local directory, or the bucket's prefix on a
    pyarrow S3 filesystem of the proxy."""
    if where.endpoint is None:
        return str(local), {}
    from tests.remote.s3 import pyarrow_s3

    return where.bucket + "/" + prefix.rstrip("/"), {"filesystem": pyarrow_s3(where.endpoint)}


def _ours(workload: str, where: Where, workers: int, start_method: str, epochs: int, **options: Any) -> Epoch:
    """Build our stream, read ``epochs`` epochs with one loader; the last epoch's time."""
    begin = time.perf_counter()
    if workload == PARQUET:
        source, more = _source(where, PARQUET_PREFIX, where.data.parquet)
        stream: Any = ParquetStream(source, batch_size=ROW_BATCH, **more, **options)
        loader = DataLoader(stream, StreamSampler(), num_workers=workers, parallel_stream=workers > 0,
                            multiprocessing_context=start_method)
    else:
        source, more = _source(where, TAR_PREFIX, where.data.tar)
        stream = TarStream(source, columns=["jpg", "cls"], **more, **options)
        loader = DataLoader(stream, StreamSampler(batch_size=IMAGE_BATCH), transform=DecodeCrop(),
                            num_workers=workers, parallel_stream=workers > 0,
                            multiprocessing_context=start_method)
    build = time.perf_counter() - begin
    try:
        for _ in range(epochs):
            epoch = _epoch(loader, build)
    finally:
        loader.close()
    return epoch


def ours(workload: str, mode: str) -> Callable[[Where, int, str], Epoch]:
    def run(where: Where, workers: int, start_method: str) -> Epoch:
        if mode == "cold":
            return _ours(workload, where, workers, start_method, 1)
        with tempfile.TemporaryDirectory(prefix="bench-remote-cache-") as cache:
            return _ours(workload, where, workers, start_method, 2, cache_dir=cache)

    return run


def webdataset_urls(where: Where) -> list[str]:
    """The tar shards as WebDataset opens them: local paths, or ``pipe:curl`` of the proxy's URLs."""
    names = where.data.shards
    if where.endpoint is None:
        return [str(where.data.tar / name) for name in names]
    return [f"pipe:curl -sf '{url}'" for url in presigned(where.endpoint, where.bucket, [TAR_PREFIX + n for n in names])]


def presigned(endpoint: str, bucket: str, keys: Sequence[str]) -> list[str]:
    """Presigned GET URLs of ``keys`` on ``endpoint`` (moto refuses anonymous GETs), valid an hour."""
    import boto3
    from botocore.config import Config

    from tests.remote.s3 import CREDENTIALS, REGION

    client = boto3.client("s3", endpoint_url=endpoint, region_name=REGION,
                          aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
                          aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
                          config=Config(s3={"addressing_style": "path"}))
    return [client.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": key}, ExpiresIn=3600)
            for key in keys]


def webdataset(where: Where, workers: int, start_method: str) -> Epoch:
    import torch.utils.data
    import webdataset as wds

    begin = time.perf_counter()
    pipeline = (wds.WebDataset(webdataset_urls(where), shardshuffle=False, empty_check=False)
                .map(decode_crop).batched(IMAGE_BATCH))
    # PyTorch's default start method (fork): WebDataset's shards are curl subprocesses, nothing to share.
    loader = torch.utils.data.DataLoader(pipeline, batch_size=None, num_workers=workers)
    build = time.perf_counter() - begin
    epoch = _epoch(loader, build)
    del loader
    gc.collect()
    return epoch


def _decoding_dataset() -> type:
    """A ``StreamingDataset`` whose samples come decoded and cropped (:func:`decode_crop`)."""
    from streaming import StreamingDataset

    class DecodingDataset(StreamingDataset):
        def __getitem__(self, index: int) -> tuple[Any, int]:
            return decode_crop(super().__getitem__(index))

    return DecodingDataset


@contextlib.contextmanager
def environment(variables: dict[str, str]) -> Iterator[None]:
    """``os.environ`` with ``variables`` set (inherited by forked workers), as it was afterwards."""
    before = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def streaming(where: Where, workers: int, start_method: str) -> Epoch:
    """One epoch of MosaicML streaming over the MDS shards; its shared memory cleaned up after."""
    import torch.utils.data
    from streaming.base.util import clean_stale_shared_memory

    from tests.remote.s3 import CLIENT_ENV

    with contextlib.ExitStack() as stack:
        if where.endpoint is None:
            options = {"remote": None, "local": str(where.data.mds)}
        else:
            stack.enter_context(environment({**CLIENT_ENV, "S3_ENDPOINT_URL": where.endpoint}))
            local = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-remote-mds-"))
            options = {"remote": f"s3://{where.bucket}/{MDS_PREFIX.rstrip('/')}", "local": local}
        clean_stale_shared_memory()
        begin = time.perf_counter()
        dataset = _decoding_dataset()(**options, batch_size=IMAGE_BATCH)
        loader = torch.utils.data.DataLoader(dataset, batch_size=IMAGE_BATCH, num_workers=workers)
        build = time.perf_counter() - begin
        try:
            return _epoch(loader, build)
        finally:
            del loader, dataset
            gc.collect()
            clean_stale_shared_memory()


def missing(contender: Contender) -> list[str]:
    """The modules the contender needs that cannot be imported."""
    return [name for name in contender.needs if importlib.util.find_spec(name) is None]


def contenders() -> tuple[Contender, ...]:
    return (
        Contender(PARQUET, OURS, "cold", ours(PARQUET, "cold")),
        Contender(PARQUET, OURS, "cached", ours(PARQUET, "cached")),
        Contender(TAR, OURS, "cold", ours(TAR, "cold"), needs=("cv2",)),
        Contender(TAR, OURS, "cached", ours(TAR, "cached"), needs=("cv2",)),
        Contender(TAR, WDS, "cold", webdataset, needs=("cv2", "torch", "webdataset")),
        Contender(TAR, STREAMING, "cold", streaming, needs=("cv2", "torch", "streaming")),
    )
