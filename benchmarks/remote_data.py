"""The remote-data bench's files, its S3 server and proxies, and the JPEG decode every tar reader runs.

:func:`write_data` writes, once per run, the tabular rows as Parquet files (4 numeric columns,
``ROW_GROUPS`` row groups per file) and encoded JPEGs of random sizes as WebDataset tar shards
(``write_tar_shards``, with their ``.idx`` indexes), in a local directory, and :func:`write_mds`
the same samples as MosaicML streaming's MDS shards; :func:`upload` puts them into a bucket of
moto's S3 server. :class:`Proxy` is a ``FaultProxy`` in a child process of
its own, with a fixed latency per object request (GET and HEAD), so that relaying the bytes does
not take the measured process's CPU. :func:`decode_crop` is what every tar contender does to a
sample: ``cv2.imdecode`` and a ``CROP_SIDE`` centre crop, in the loader's workers.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dataloader import write_tar_shards
from dataloader.transform import Transform

ROW_GROUPS = 8  # per Parquet file
MIN_SIDE, MAX_SIDE, CROP_SIDE = 64, 224, 64
CLASSES = 10
PARQUET_PREFIX, TAR_PREFIX, MDS_PREFIX = "parquet/", "tar/", "mds/"
ROOT = Path(__file__).resolve().parents[1]  # the checkout: tests.remote.s3 is imported from it


@dataclass(frozen=True)
class Data:
    """Where one run's files lie, locally and in the bucket."""

    parquet: Path  # a directory of Parquet files
    tar: Path  # a directory of tar shards with their .idx
    rows: int
    images: int
    parquet_bytes: int
    tar_bytes: int
    shards: tuple[str, ...]  # the tar shards' names, in order

    @property
    def mds(self) -> Path:
        """The directory :func:`write_mds` writes the tar shards' samples to, as MDS shards."""
        return self.tar.parent / "mds"


def tabular(rows: int, seed: int = 0) -> pa.Table:
    """``rows`` rows of 4 numeric columns: 2 float32, 2 int64."""
    rng = np.random.default_rng(seed)
    return pa.table({
        "f0": rng.random(rows, dtype=np.float32), "f1": rng.random(rows, dtype=np.float32),
        "i0": rng.integers(0, 1 << 40, rows), "i1": rng.integers(0, 1000, rows),
    })


def jpeg(rng: np.random.Generator) -> bytes:
    """One JPEG of a random size from ``MIN_SIDE`` to ``MAX_SIDE`` a side: smooth random colour
    plus a little noise, which compresses about as a photo does."""
    import cv2

    height, width = (int(s) for s in rng.integers(MIN_SIDE, MAX_SIDE + 1, 2))
    coarse = rng.integers(0, 256, (6, 6, 3), dtype=np.uint8)
    smooth = cv2.resize(coarse, (width, height), interpolation=cv2.INTER_CUBIC)
    noisy = np.clip(smooth + rng.normal(0, 6, smooth.shape), 0, 255).astype(np.uint8)
    ok, data = cv2.imencode(".jpg", noisy, [cv2.IMWRITE_JPEG_QUALITY, 90])
    if not ok:
        raise RuntimeError("OpenCV could not encode a generated image as JPEG.")
    return data.tobytes()


def write_data(directory: Path, files: int, rows_per_file: int, images: int, shards: int) -> Data:
    """The Parquet files and the tar shards, in ``directory``."""
    parquet, tar = directory / "parquet", directory / "tar"
    parquet.mkdir(parents=True)
    for n in range(files):
        pq.write_table(tabular(rows_per_file, seed=n), parquet / f"part-{n:03d}.parquet",
                       row_group_size=-(-rows_per_file // ROW_GROUPS))
    rng = np.random.default_rng(0)
    samples = ({"__key__": f"{i:08d}", "jpg": jpeg(rng), "cls": i % CLASSES} for i in range(images))
    write_tar_shards(samples, tar, samples_per_shard=-(-images // shards))
    names = tuple(sorted(p.name for p in tar.glob("*.tar")))
    return Data(parquet, tar, files * rows_per_file, images, _size(parquet), _size(tar, ".tar"), names)


def _size(directory: Path, suffix: str = "") -> int:
    return sum(p.stat().st_size for p in directory.iterdir() if p.name.endswith(suffix))


def upload(endpoint: str, bucket: str, data: Data) -> None:
    """The directories into ``bucket`` (created), under ``PARQUET_PREFIX``, ``TAR_PREFIX`` and, once
    written, ``MDS_PREFIX``."""
    from tests.remote.s3 import create_bucket, upload_tree

    create_bucket(endpoint, bucket)
    upload_tree(endpoint, bucket, data.parquet, PARQUET_PREFIX)
    upload_tree(endpoint, bucket, data.tar, TAR_PREFIX)
    if data.mds.is_dir():  # written where MosaicML streaming runs
        upload_tree(endpoint, bucket, data.mds, MDS_PREFIX)


def tar_samples(path: Path) -> Iterator[tuple[bytes, int]]:
    """``(jpeg, label)`` of every sample of one tar shard, in order (members ``key.jpg``, ``key.cls``)."""
    with tarfile.open(path) as tar:
        sample: dict[str, bytes] = {}
        for member in tar:
            file = tar.extractfile(member)
            if file is not None:
                sample[member.name.rsplit(".", 1)[1]] = file.read()
            if "jpg" in sample and "cls" in sample:
                yield sample["jpg"], int(sample["cls"])
                sample = {}


def write_mds(data: Data) -> Path:
    """The tar shards' samples once more as MosaicML streaming's MDS shards (columns ``jpg``: bytes,
    ``cls``: int), written by its ``MDSWriter`` into ``data.mds``, uncompressed, with a size limit
    that gives about as many shards as the tar has; the directory."""
    from streaming import MDSWriter

    samples = [s for name in data.shards for s in tar_samples(data.tar / name)]
    payload = sum(len(jpg) + _MDS_SAMPLE_OVERHEAD for jpg, _ in samples)
    with MDSWriter(out=str(data.mds), columns={"jpg": "bytes", "cls": "int"},
                   size_limit=-(-payload // len(data.shards)) + _MDS_SAMPLE_OVERHEAD * 64) as writer:
        for jpg, label in samples:
            writer.write({"jpg": jpg, "cls": label})
    return data.mds


_MDS_SAMPLE_OVERHEAD = 16  # bytes an MDS sample adds to its JPEG (its offset, the length of the bytes, the int)


def decode(data: bytes) -> np.ndarray:
    """A JPEG's ``CROP_SIDE`` square centre crop, decoded with ``cv2.imdecode`` (BGR)."""
    import cv2

    image = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    top, left = (image.shape[0] - CROP_SIDE) // 2, (image.shape[1] - CROP_SIDE) // 2
    return np.ascontiguousarray(image[top:top + CROP_SIDE, left:left + CROP_SIDE])


def decode_crop(sample: dict) -> tuple[np.ndarray, int]:
    """A tar sample ``{"jpg": bytes, "cls": int, ...}`` -> ``(crop, label)``."""
    return decode(sample["jpg"]), int(sample["cls"])


class DecodeCrop(Transform):
    """:func:`decode_crop` as this loader's per-sample transform."""

    def apply(self, input: Any) -> Any:
        return decode_crop(input)


_PROXY_MAIN = """
import sys
from tests.remote._proxy import FaultProxy
proxy = FaultProxy(sys.argv[1])
proxy.methods = frozenset({"GET", "HEAD"})
proxy.latency = float(sys.argv[2])
print(proxy.endpoint, flush=True)
sys.stdin.read()
proxy.stop()
"""


class Proxy:
    """A ``FaultProxy`` in front of ``upstream`` in a child process, adding ``latency`` seconds
    to every object request (GET, HEAD); ``endpoint`` is its URL. Stopped by closing its stdin."""

    def __init__(self, upstream: str, latency: float) -> None:
        self.latency = latency
        self.process = subprocess.Popen(
            [sys.executable, "-c", _PROXY_MAIN, upstream, repr(latency)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True, cwd=ROOT,
            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])},
        )
        assert self.process.stdout is not None
        self.endpoint = self.process.stdout.readline().strip()
        if not self.endpoint.startswith("http://"):
            self.stop()
            raise RuntimeError(f"the fault proxy did not start (latency {latency} s)")

    def stop(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
