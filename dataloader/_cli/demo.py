"""``python -m dataloader demo``: the README's main job."""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

from .. import ArrayDataset, DataLoader, RandomSampler
from ..memory import process_tree_memory
from ..transform import Compose, Transform


class _RandomFlip(Transform):
    """Flips an HWC image left-right half of the time (per-batch seeded, so reproducible)."""

    def apply(self, input: tuple) -> tuple:
        image, label = input
        if np.random.rand() < 0.5:
            image = image[:, ::-1]
        return image, label


class _Normalize(Transform):
    """uint8 HWC -> float32 CHW in [-1, 1]."""

    def apply(self, input: tuple) -> tuple:
        image, label = input
        chw = np.ascontiguousarray(image.transpose(2, 0, 1), dtype=np.float32)
        chw *= 1 / 127.5
        chw -= 1.0
        return chw, label


def _synthetic_images(count: int, size: int) -> ArrayDataset:
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(count, size, size, 3), dtype=np.uint8)
    labels = rng.integers(0, 10, size=count).astype(np.int32)
    return ArrayDataset(images, labels)


def demo(args: argparse.Namespace) -> int:
    dataset = _synthetic_images(args.samples, args.size)
    loader = DataLoader(
        dataset,
        RandomSampler(dataset, batch_size=args.batch_size, drop_last=True, seed=0),
        transform=Compose([_RandomFlip(), _Normalize()]),
        num_workers=args.workers,
        timeout=60,
        seed=0,
        persistent_workers=args.workers > 0,
        preload=True,
    )
    progress = _progress_bar()
    samples = 0
    start = time.perf_counter()
    peak = 0
    for epoch in range(args.epochs):
        with iter(loader) as batches:
            for images, labels in progress(batches, desc=f"epoch {epoch}", unit="batch"):
                samples += len(labels)
                peak = max(peak, process_tree_memory().rss)
    elapsed = time.perf_counter() - start
    stats = loader.stats()
    loader.close()
    print(
        f"{args.epochs} epochs, {samples} samples of {images.shape[1:]} {images.dtype} in "
        f"{elapsed:.2f} s: {samples / elapsed:,.0f} samples/s with {args.workers} workers; "
        f"peak RSS of the process tree {peak / 2**20:,.0f} MiB"
    )
    print(f"\nstages of the last epoch:\n{stats.table()}")
    return 0


def _progress_bar():
    try:
        from tqdm import tqdm
    except ImportError:  # the vision extra brings tqdm; without it, no bar
        return lambda iterable, **_: iterable
    return tqdm


def add_parser(commands: Any) -> None:
    parser = commands.add_parser("demo", help="load an image workload with workers, preload and the stage table")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--samples", type=int, default=2048)
    parser.add_argument("--size", type=int, default=96)
    parser.set_defaults(run=demo)
