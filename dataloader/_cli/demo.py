"""``python -m dataloader demo``: the README's main job.

On first run it writes a small image-classification workload — a few hundred
real JPEG files in class folders, cached under the user cache directory — then
loads it for a few epochs the way a training job would: an ImageFolder of
the files' bytes, 2 workers that decode each JPEG at the scale its random-resized crop needs,
flip + normalize, preload, a tqdm progress bar,
and at the end the stage-timing table with its verdict. ``--data DIR`` runs
the same on your own ImageFolder-style directory.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from .. import DataLoader, ImageFolder, RandomSampler
from ..errors import ArgumentValueError, DataLoaderError, WorkerError
from ..memory import process_tree_memory
from .._image_codec import encode_jpeg
from ..argtypes import positive_int, worker_count

_CLASSES = ("circle", "square", "stripes", "checker", "ring", "cross", "diagonal", "dots")


def add_parser(commands: Any) -> None:
    parser = commands.add_parser("demo", help="load a JPEG workload with workers, preload and the stage table")
    parser.add_argument(
        "--data", metavar="DIR",
        help="an ImageFolder-style directory (default: a generated JPEG set)",
    )
    parser.add_argument(
        "--workers", type=worker_count, default=2, metavar="N",
        help="num_workers; 0 makes batches in this process (default 2)",
    )
    parser.add_argument(
        "--batch-size", type=positive_int, default=32, metavar="N", help="images per batch (default 32)"
    )
    parser.add_argument(
        "--epochs", type=positive_int, default=3, metavar="N", help="epochs to run (default 3)"
    )
    parser.add_argument(
        "--size", type=positive_int, default=160, metavar="N",
        help="side of the crops fed to the model (default 160)",
    )
    parser.add_argument(
        "--images", type=positive_int, default=320, metavar="N",
        help="images to generate, generated set only (default 320)",
    )
    parser.add_argument("--tiny", action="store_true", help="a few small images, one epoch: a smoke run")
    parser.set_defaults(run=demo)


def demo(args: argparse.Namespace) -> int:
    """The demo; what the library refuses (a ``--data`` that is no ImageFolder, an image that
    does not decode) or an unwritable cache is one line on stderr and exit code 2."""
    try:
        return _demo(args)
    except (DataLoaderError, OSError) as error:
        lines = [line for line in str(error).splitlines() if line.strip()] or [type(error).__name__]
        first = lines[0].replace("`root`", "--data")  # ImageFolder's name for it
        if isinstance(error, WorkerError) and len(lines) > 1:
            first += f" The cause: {lines[-1].strip()}"  # the worker's exception ends its traceback
        print(f"python -m dataloader demo: error: {first}", file=sys.stderr)
        return 2


def _demo(args: argparse.Namespace) -> int:
    try:
        from ..transform.vision import (
            IMAGE_BACKEND,
            Compose,
            DecodeRandomResizedCrop,
            Normalize,
            RandomHorizontalFlip,
            ToMode,
        )
    except ImportError as error:
        if isinstance(error, DataLoaderError):  # DATALOADER_IMAGE_BACKEND names a missing library
            raise
        print("the demo needs the vision extra: pip install 'dataloader[vision]'")
        return 2
    if args.tiny:
        args.images, args.size, args.epochs, args.batch_size = 48, 64, 1, 8
    # --data as typed: Path() would turn s3://b/x into s3:/b/x in the message that refuses it
    root = args.data if args.data else str(_generated_images(args.images, 96 if args.tiny else 256))
    dataset = ImageFolder(root, decode=False)  # the files' bytes: the workers decode
    if len(dataset) < args.batch_size:  # drop_last=True: not one batch, and nothing to show
        raise ArgumentValueError(
            f"--batch-size {args.batch_size} is more than the {len(dataset)} images in {root!r}; "
            "give a smaller --batch-size or more images"
        )
    transform = Compose([
        DecodeRandomResizedCrop(args.size),  # a JPEG decoded only at the scale the crop needs
        RandomHorizontalFlip(),
        Normalize(mean=(103.5, 116.3, 123.7), std=(57.4, 57.1, 58.4)),  # ImageNet's, in BGR order
        ToMode("CHW"),
    ])
    loader = DataLoader(
        dataset,
        RandomSampler(dataset, batch_size=args.batch_size, drop_last=True, seed=0),
        transform=transform,
        num_workers=args.workers,
        timeout=120,
        seed=0,
        preload=True,
        persistent_workers=args.workers > 0,
    )
    library = "OpenCV" if IMAGE_BACKEND == "opencv" else "Pillow and NumPy (no OpenCV)"
    print(f"{len(dataset)} images in {len(dataset.classes)} classes from {root}; "
          f"decoded and transformed with {library}")
    progress = _progress_bar()
    samples, peak = 0, 0
    start = time.perf_counter()
    for epoch in range(args.epochs):
        with iter(loader) as batches:
            for images, labels in progress(batches, desc=f"epoch {epoch}", unit="batch"):
                samples += len(labels)
                peak = max(peak, process_tree_memory().rss)
    elapsed = time.perf_counter() - start
    stats = loader.stats()
    loader.close()
    epochs = f"{args.epochs} epoch{'' if args.epochs == 1 else 's'}"
    workers = f"{args.workers} worker{'' if args.workers == 1 else 's'}"
    if args.workers:  # threads by default on a free-threaded Python (3.14t), processes elsewhere
        kind = loader.options.worker_type
        workers += f" ({kind if args.workers == 1 else {'process': 'processes', 'thread': 'threads'}[kind]})"
    print(
        f"{epochs}, {samples} images decoded and augmented to {images.shape[1:]} {images.dtype} in "
        f"{elapsed:.2f} s: {samples / elapsed:,.0f} images/s with {workers}; peak RSS of the process "
        f"tree {peak / 2**20:,.0f} MiB"
    )
    print(f"\nstages of the last epoch:\n{stats.table()}")
    return 0


def _generated_images(count: int, side: int) -> Path:
    """A cached folder of ``count`` JPEGs in class sub-folders, written on first use."""
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "dataloader"
    root = base / f"demo-jpeg-{count}-{side}"
    if (root / ".complete").exists():
        return root
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:side, 0:side].astype(np.float32) / side
    for index in range(count):
        name = _CLASSES[index % len(_CLASSES)]
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        image = _draw(name, xx, yy, rng)
        (folder / f"{index:05d}.jpg").write_bytes(encode_jpeg(image, quality=90))
    (root / ".complete").touch()
    return root


def _draw(name: str, xx: np.ndarray, yy: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    cx, cy, scale = rng.uniform(0.3, 0.7), rng.uniform(0.3, 0.7), rng.uniform(0.15, 0.35)
    radius = np.hypot(xx - cx, yy - cy)
    patterns = {
        "circle": radius < scale,
        "square": (abs(xx - cx) < scale) & (abs(yy - cy) < scale),
        "stripes": np.sin(xx * 40 * scale) > 0,
        "checker": (np.floor(xx * 12 * scale) + np.floor(yy * 12 * scale)) % 2 == 0,
        "ring": abs(radius - scale) < 0.04,
        "cross": (abs(xx - cx) < 0.05) | (abs(yy - cy) < 0.05),
        "diagonal": np.sin((xx + yy) * 30 * scale) > 0,
        "dots": np.sin(xx * 60 * scale) * np.sin(yy * 60 * scale) > 0.5,
    }
    shape = patterns[name].astype(np.float32)
    color = rng.uniform(60, 255, size=3).astype(np.float32)
    background = rng.uniform(0, 80, size=3).astype(np.float32)
    noise = rng.normal(0, 12, size=(*xx.shape, 3)).astype(np.float32)
    image = background + shape[..., None] * (color - background) + noise
    return np.clip(image, 0, 255).astype(np.uint8)


def _progress_bar() -> Any:
    try:
        from tqdm import tqdm
    except ImportError:  # the vision extra brings tqdm; without it, no bar
        return lambda iterable, **_: iterable
    return tqdm
