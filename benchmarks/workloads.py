"""The benchmark's workloads: their datasets, batch sizes and which runs make up a group.

Twelve workloads, all run by default. Six compare loaders (ours, PyTorch's, no loader, the
ideal):

- ``tiny``: per-sample overhead. 2M samples of (float32[8], int), batches of 256 (an epoch
  outlasts the measured 1.5 s, as the other workloads' do).
- ``scalars``, ``record`` and ``vector`` (``SMALL``; datasets in ``small.py``): small samples,
  2M of them, batches of 256: (int, float) Python scalars; a dict of an int, a float, a bool
  and a short string; (float32[16], NumPy int64).
- ``images``: bandwidth. 3x224x224 uint8 images from a preallocated pool, batches of 64.
- ``decode``: CPU work. JPEGs decoded with Pillow and cropped at random, batches of 32.

Two compare loaders on transforms that call a library with its own thread pool (ours,
PyTorch's and no loader, 2 workers): in workers, each pool would take every core.

- ``matmul``: a NumPy matrix product per sample (OpenBLAS). PyTorch's workers leave it alone.
- ``torchconv``: a PyTorch convolution per sample. PyTorch's workers cap torch at 1 thread.

Four compare settings of our loader:

- ``preload``: decode batches with preload off and on, against a consumer whose NumPy
  matmul step is calibrated to take as long as loading a batch; num_workers 0 and 2.
- ``cv2`` and ``pyloop``: thread against process workers (num_workers 2), on a transform
  that releases the GIL (cv2.imdecode + crop) and on one that holds it (a Python loop).
- ``monitor``: tiny batches with ``DATALOADER_MONITOR`` unset and set to 1.
"""

from __future__ import annotations

import functools
import importlib.util
import io
import random
from dataclasses import dataclass
from typing import Callable

import numpy as np

from dataloader import Dataset

from .small import RecordDataset, ScalarsDataset, VectorDataset

# Run labels. The first four are the default comparison; the rest are settings of ours.
OURS, TORCH, BASELINE, IDEAL = "ours", "torch", "no-loader", "ideal"
THREAD = "ours-thread"  # worker_type="thread"
PRELOAD = "ours+preload"  # preload=True, with the calibrated step as consumer
LOAD_ONLY = "load-only"  # ours with preload off and no step: the time to load a batch
STEP_ONLY = "step-only"  # the calibrated step on a batch made once: no loading at all
MONITOR = "ours+monitor"  # DATALOADER_MONITOR=1, the log discarded by a NullHandler
# The plain loop with our Collator in place of its stack (small samples, 0 workers): what our
# collator's checks leave of the plain loop's rate with no loader around them, the serial ceiling.
COLLATOR_FLOOR = "no-loader+collator"

# The loader options each run of our loader uses, beyond num_workers and prefetch_factor.
OUR_OPTIONS = {
    OURS: {}, THREAD: {"worker_type": "thread"}, PRELOAD: {"preload": True},
    LOAD_ONLY: {}, MONITOR: {},
}


class TinyDataset(Dataset):
    """(float32[8], int label): almost no work per sample, so the loader's overhead shows."""

    def __init__(self, size: int = 2_000_000) -> None:
        rng = np.random.default_rng(0)
        self.vectors = rng.standard_normal((size, 8), dtype=np.float32)
        self.labels = rng.integers(0, 1000, size)

    def __getitem__(self, index: int) -> tuple:
        return self.vectors[index], int(self.labels[index])

    def __len__(self) -> int:
        return len(self.labels)


class ImageDataset(Dataset):
    """(uint8[3, 224, 224], int label): image ``i`` is pool entry ``i % len(pool)``.

    The pool (256 images, 37 MiB) is larger than the CPU's private caches, so a batch is
    copied from memory, as freshly decoded images would be.
    """

    def __init__(self, size: int = 256_000, pool: int = 256) -> None:
        rng = np.random.default_rng(1)
        self.pool = rng.integers(0, 256, (pool, 3, 224, 224), dtype=np.uint8)
        self.size = size

    def __getitem__(self, index: int) -> tuple:
        return self.pool[index % len(self.pool)], index % 1000

    def __len__(self) -> int:
        return self.size


class DecodeDataset(Dataset):
    """(uint8[3, crop, crop], int label): decode one in-memory JPEG with Pillow, crop at random."""

    def __init__(self, size: int = 32_000, count: int = 256, side: int = 256, crop: int = 160):
        self.blobs = make_jpegs(count, side)
        self.size, self.crop = size, crop

    def __getitem__(self, index: int) -> tuple:
        from PIL import Image

        blob = self.blobs[index % len(self.blobs)]
        image = np.asarray(Image.open(io.BytesIO(blob)).convert("RGB"))
        return _random_crop(image, self.crop), index % 1000

    def __len__(self) -> int:
        return self.size


class Cv2DecodeDataset(DecodeDataset):
    """As :class:`DecodeDataset`, decoded with ``cv2.imdecode``, which releases the GIL."""

    def __init__(self, size: int = 32_000, count: int = 256, side: int = 256, crop: int = 160):
        import cv2  # noqa: F401  (fail at start-up where OpenCV is missing)

        super().__init__(size, count, side, crop)

    def __getitem__(self, index: int) -> tuple:
        import cv2

        blob = np.frombuffer(self.blobs[index % len(self.blobs)], np.uint8)
        image = cv2.imdecode(blob, cv2.IMREAD_COLOR)
        return _random_crop(image, self.crop), index % 1000


class PyLoopDataset(Dataset):
    """(float32[8], int label) computed by a pure-Python loop, ~55 us per sample: it holds
    the GIL throughout, as tokenising or parsing records in Python does."""

    def __init__(self, size: int = 100_000, length: int = 64, rounds: int = 12) -> None:
        self.values = list(range(length)) * rounds
        self.size = size

    def __getitem__(self, index: int) -> tuple:
        row = [0.0] * 8
        scale = index % 13 + 1
        for k, value in enumerate(self.values):
            row[k & 7] += (value * scale) % 17
        return np.array(row, np.float32), index % 1000

    def __len__(self) -> int:
        return self.size


class MatmulDataset(Dataset):
    """(float32[192], int label): column sums of ``a @ a.T`` for a 192x192 matrix, about 0.3 ms
    of BLAS per sample, large enough for OpenBLAS to run it on every core it has."""

    def __init__(self, size: int = 100_000, pool: int = 64, side: int = 192) -> None:
        self.pool = np.random.default_rng(4).standard_normal((pool, side, side), dtype=np.float32)
        self.size = size

    def __getitem__(self, index: int) -> tuple:
        a = self.pool[index % len(self.pool)]
        return (a @ a.T).sum(axis=0), index % 1000

    def __len__(self) -> int:
        return self.size


class TorchConvDataset(Dataset):
    """(float32[96, 96], int label): a 3x3 convolution of a 3x96x96 image to 16 channels with
    PyTorch, ReLU, then the channel mean: about 0.1 ms per sample on one core."""

    def __init__(self, size: int = 100_000, pool: int = 64, side: int = 96) -> None:
        import torch

        self.pool = np.random.default_rng(5).standard_normal((pool, 3, side, side), dtype=np.float32)
        weight = np.random.default_rng(6).standard_normal((16, 3, 3, 3), dtype=np.float32)
        self.weight = torch.from_numpy(weight)
        self.size = size

    def __getitem__(self, index: int) -> tuple:
        import torch

        image = torch.from_numpy(self.pool[index % len(self.pool)])[None]
        features = torch.nn.functional.conv2d(image, self.weight, padding=1).relu_().mean(dim=1)
        return features[0].numpy(), index % 1000

    def __len__(self) -> int:
        return self.size


def _random_crop(image: np.ndarray, crop: int) -> np.ndarray:
    top = random.randrange(image.shape[0] - crop + 1)
    left = random.randrange(image.shape[1] - crop + 1)
    patch = image[top : top + crop, left : left + crop]
    return np.ascontiguousarray(patch.transpose(2, 0, 1))


@functools.lru_cache(maxsize=4)
def make_jpegs(count: int, side: int) -> tuple[bytes, ...]:
    """``count`` photo-like JPEGs (smooth colour fields plus noise, ~30 KB each), quality 90.

    Cached: several workloads decode the same JPEGs, and encoding them takes a second or two.
    """
    from PIL import Image

    rng = np.random.default_rng(2)
    y, x = np.mgrid[0:side, 0:side].astype(np.float32) / side
    blobs = []
    for i in range(count):
        fx, fy, phase = 3 + i % 7, 2 + i % 5, i / count * 6.28
        field = np.stack([np.sin(fx * x + phase), np.cos(fy * y), np.sin(fx * x + fy * y)], -1)
        noisy = field * 90 + 128 + rng.normal(0, 10, field.shape)
        buffer = io.BytesIO()
        Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8)).save(buffer, "JPEG", quality=90)
        blobs.append(buffer.getvalue())
    return tuple(blobs)


@dataclass(frozen=True)
class Workload:
    name: str
    batch_size: int
    make: Callable[[bool], Dataset]  # small -> dataset
    what: str
    deterministic: bool  # whether batches can be compared value for value
    # The runs of one group; None: the default comparison (see loaders_for).
    runs: tuple[str, ...] | None = None
    # Fixed num_workers values; None: the --workers option.
    workers: tuple[int, ...] | None = None
    # A module the dataset needs beyond NumPy and Pillow, and what installs it.
    needs: tuple[str, str] | None = None
    # Whether the serial group also runs the plain loop with our collator (COLLATOR_FLOOR).
    collator_floor: bool = False

    def loaders(self, workers: int, with_torch: bool) -> list[str]:
        """The runs of one (workload, num_workers) group, in their first repetition's order."""
        if self.runs is not None:
            return [run for run in self.runs if run != TORCH or with_torch]
        floor = [COLLATOR_FLOOR] * (self.collator_floor and workers == 0)
        return [OURS] + [TORCH] * with_torch + [BASELINE] + [IDEAL] * (workers >= 2) + floor


def _decode(small: bool) -> Dataset:
    return DecodeDataset(4_000 if small else 32_000, 64 if small else 256)


def _small(name: str, make: Callable[[int], Dataset], what: str) -> Workload:
    """A small-sample workload: 2M samples (50k for smoke runs), batches of 256."""
    return Workload(name, 256, lambda small: make(50_000 if small else 2_000_000),
                    f"small samples: {what}, batch 256", True, collator_floor=True)


WORKLOADS = {
    "tiny": Workload(
        "tiny", 256, lambda small: TinyDataset(50_000 if small else 2_000_000),
        "per-sample overhead: (float32[8], int) samples, batch 256", True,
    ),
    "scalars": _small("scalars", ScalarsDataset, "(int, float) Python scalars"),
    "record": _small("record", RecordDataset, "dict of int, float, bool and a short str"),
    "vector": _small("vector", VectorDataset, "(float32[16], numpy int64)"),
    "images": Workload(
        "images", 64, lambda small: ImageDataset(16_000 if small else 256_000),
        "bandwidth: uint8[3,224,224] images from a 256-image pool, batch 64", True,
    ),
    "decode": Workload(
        "decode", 32, _decode,
        "CPU: JPEG decode (256x256) + random crop to uint8[3,160,160], batch 32", False,
    ),
    "preload": Workload(
        "preload", 32, _decode,
        "overlap: decode batches against a NumPy matmul step as long as loading a batch", False,
        runs=(LOAD_ONLY, STEP_ONLY, OURS, PRELOAD), workers=(0, 2),
    ),
    "cv2": Workload(
        "cv2", 32,
        lambda small: Cv2DecodeDataset(4_000 if small else 32_000, 64 if small else 256),
        "GIL released: cv2.imdecode (256x256) + random crop, batch 32; threads vs processes",
        False, runs=(OURS, THREAD, BASELINE), workers=(2,), needs=("cv2", "opencv-python"),
    ),
    "pyloop": Workload(
        "pyloop", 64, lambda small: PyLoopDataset(10_000 if small else 100_000),
        "GIL held: a pure-Python loop per sample (~55 us), batch 64; threads vs processes",
        True, runs=(OURS, THREAD, BASELINE), workers=(2,),
    ),
    "matmul": Workload(
        "matmul", 32, lambda small: MatmulDataset(4_000 if small else 100_000),
        "thread pools: a NumPy 192x192 matmul per sample (BLAS), batch 32", False,
        runs=(OURS, TORCH, BASELINE), workers=(2,),
    ),
    "torchconv": Workload(
        "torchconv", 32, lambda small: TorchConvDataset(4_000 if small else 100_000),
        "thread pools: a PyTorch 3x3 convolution per sample, batch 32", False,
        runs=(OURS, TORCH, BASELINE), workers=(2,), needs=("torch", "torch"),
    ),
    "monitor": Workload(
        "monitor", 256, lambda small: TinyDataset(50_000 if small else 1_000_000),
        "monitoring: tiny batches, DATALOADER_MONITOR unset vs 1 (1M samples: long epochs)",
        True, runs=(OURS, MONITOR),
    ),
}

COMPARISONS = ("tiny", "scalars", "record", "vector", "images", "decode")
SMALL = ("scalars", "record", "vector")
SETTINGS = ("preload", "cv2", "pyloop", "monitor")


def missing_module(name: str) -> str | None:
    """What workload ``name`` needs and cannot import here ("cv2 (opencv-python)"), or None."""
    needs = WORKLOADS[name].needs
    if needs is None or importlib.util.find_spec(needs[0]) is not None:
        return None
    return f"{needs[0]} ({needs[1]})"


def default_workloads() -> tuple[str, ...]:
    """Every workload whose modules this machine can import."""
    return tuple(name for name in WORKLOADS if missing_module(name) is None)
