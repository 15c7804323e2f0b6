"""Throughput of each vision transform on 224x224 uint8 images, against peers.

For every transform of ``dataloader.transform.vision`` this times ``apply`` on
a 224x224x3 uint8 BGR image, in images per CPU-second of one thread (OpenCV
limited to one thread, so every column uses one core and other processes on a
shared machine hardly change the numbers) and, where one exists, the same
operation:

- in torchvision (``torchvision.transforms`` on a PIL image), when it is importable;
- otherwise in plain Pillow (``Image.resize``, ``ImageEnhance``, ...), which is
  what torchvision itself runs on PIL images. The output says which.

Pillow's timing starts from a ``PIL.Image`` (the NumPy -> PIL conversion is
left out), ours from an ndarray. With ``--threads N`` a last column gives our
aggregate wall-clock images/s with N threads sharing one transform instance,
each with its own generator: OpenCV releases the GIL, so this scales with the
cores that are free (and so depends on the machine's other load).

Each measurement runs for ``--seconds`` and is repeated ``--reps`` times in a
rotating order; the best repetition is reported (the least disturbed by other
processes on a shared machine).

``--tune-malloc`` raises glibc's mmap and trim thresholds first (``mallopt``,
like ``MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=67108864``). By
default glibc hands freed 600 KB float32 images back to the kernel, so the
next allocation page-faults it in again; transforms that hold two such arrays
at once (Normalize, GaussianNoise) then spend most of their time in the
kernel. Pillow keeps its own block cache and is not affected.

Usage: ``python tools/bench_vision.py [--seconds 0.3] [--reps 3] [--threads 2]
[--only Resize,Normalize] [--markdown]``.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from typing import Any, Callable

import numpy as np

import cv2

import dataloader.transform.vision as V
from dataloader.rng import _using

SIZE = 224


def ours() -> dict[str, Any]:
    """Our transform per row name; random ones at settings that always do work."""
    return {
        "Resize((256, 256))": V.Resize((256, 256)),
        "ShortestEdgeResize(256, 512)": V.ShortestEdgeResize(256, 512),
        "RandomResize((0.8, 1.2))": V.RandomResize((0.8, 1.2)),
        "RandomResizedCrop(224)": V.RandomResizedCrop(224),
        "CenterCrop(200)": V.CenterCrop(200),
        "RandomCrop(200, padding 4)": V.RandomCrop(200, padding_size=4),
        "Pad(4)": V.Pad(4),
        "RandomHorizontalFlip(p=1)": V.RandomHorizontalFlip(1.0),
        "RandomVerticalFlip(p=1)": V.RandomVerticalFlip(1.0),
        "BrightnessTransform(0.4)": V.BrightnessTransform(0.4),
        "ContrastTransform(0.4)": V.ContrastTransform(0.4),
        "SaturationTransform(0.4)": V.SaturationTransform(0.4),
        "HueTransform(0.1)": V.HueTransform(0.1),
        "ColorJitter(0.4, 0.4, 0.4, 0.1)": V.ColorJitter(0.4, 0.4, 0.4, 0.1),
        "Lighting(0.1)": V.Lighting(0.1),
        "GaussianNoise(0, 0.05)": V.GaussianNoise(0.0, 0.05),
        "Normalize(mean, std)": V.Normalize([103.5, 116.3, 123.7], [57.4, 57.1, 58.4]),
        "ToMode('CHW')": V.ToMode("CHW"),
    }


def pillow_ops(rng: np.random.Generator) -> dict[str, Callable[[Any], Any]]:
    """Plain-Pillow versions of the same operations (what torchvision runs on PIL images)."""
    from PIL import Image, ImageEnhance, ImageOps

    bilinear = Image.Resampling.BILINEAR

    def factor(v: float) -> float:
        return float(rng.uniform(max(0.0, 1 - v), 1 + v))

    def random_resized_crop(img: Any) -> Any:
        side = int(SIZE * np.sqrt(rng.uniform(0.08, 1.0)))
        x, y = rng.integers(SIZE - side + 1, size=2)
        return img.resize((224, 224), bilinear, box=(x, y, x + side, y + side))

    def random_crop(img: Any) -> Any:
        padded = ImageOps.expand(img, 4)
        x, y = rng.integers(SIZE + 8 - 200 + 1, size=2)
        return padded.crop((x, y, x + 200, y + 200))

    def hue(img: Any) -> Any:
        h, s, v = img.convert("HSV").split()
        shift = int(rng.uniform(-0.1, 0.1) * 255) % 256
        h = h.point(lambda p: (p + shift) % 256)
        return Image.merge("HSV", (h, s, v)).convert("RGB")

    def jitter(img: Any) -> Any:
        img = ImageEnhance.Brightness(img).enhance(factor(0.4))
        img = ImageEnhance.Contrast(img).enhance(factor(0.4))
        img = ImageEnhance.Color(img).enhance(factor(0.4))
        return hue(img)

    def random_resize(img: Any) -> Any:
        side = int(round(SIZE * rng.uniform(0.8, 1.2)))
        return img.resize((side, side), bilinear)

    margin = (SIZE - 200) // 2
    return {
        "Resize((256, 256))": lambda img: img.resize((256, 256), bilinear),
        "ShortestEdgeResize(256, 512)": lambda img: img.resize((256, 256), bilinear),
        "RandomResize((0.8, 1.2))": random_resize,
        "RandomResizedCrop(224)": random_resized_crop,
        "CenterCrop(200)": lambda img: img.crop((margin, margin, margin + 200, margin + 200)),
        "RandomCrop(200, padding 4)": random_crop,
        "Pad(4)": lambda img: ImageOps.expand(img, 4),
        "RandomHorizontalFlip(p=1)": lambda img: img.transpose(Image.Transpose.FLIP_LEFT_RIGHT),
        "RandomVerticalFlip(p=1)": lambda img: img.transpose(Image.Transpose.FLIP_TOP_BOTTOM),
        "BrightnessTransform(0.4)": lambda img: ImageEnhance.Brightness(img).enhance(factor(0.4)),
        "ContrastTransform(0.4)": lambda img: ImageEnhance.Contrast(img).enhance(factor(0.4)),
        "SaturationTransform(0.4)": lambda img: ImageEnhance.Color(img).enhance(factor(0.4)),
        "HueTransform(0.1)": hue,
        "ColorJitter(0.4, 0.4, 0.4, 0.1)": jitter,
    }


def torchvision_ops() -> dict[str, Callable[[Any], Any]] | None:
    """torchvision's equivalents on PIL images, or None when torchvision is not importable."""
    try:
        import torchvision.transforms as T
    except ImportError:
        return None
    return {
        "Resize((256, 256))": T.Resize((256, 256)),
        "ShortestEdgeResize(256, 512)": T.Resize(256, max_size=512),
        "RandomResizedCrop(224)": T.RandomResizedCrop(224),
        "CenterCrop(200)": T.CenterCrop(200),
        "RandomCrop(200, padding 4)": T.RandomCrop(200, padding=4),
        "Pad(4)": T.Pad(4),
        "RandomHorizontalFlip(p=1)": T.RandomHorizontalFlip(1.0),
        "RandomVerticalFlip(p=1)": T.RandomVerticalFlip(1.0),
        "BrightnessTransform(0.4)": T.ColorJitter(brightness=0.4),
        "ContrastTransform(0.4)": T.ColorJitter(contrast=0.4),
        "SaturationTransform(0.4)": T.ColorJitter(saturation=0.4),
        "HueTransform(0.1)": T.ColorJitter(hue=0.1),
        "ColorJitter(0.4, 0.4, 0.4, 0.1)": T.ColorJitter(0.4, 0.4, 0.4, 0.1),
    }


def rate(call: Callable[[], Any], seconds: float) -> float:
    """Calls per CPU-second of this thread, over about ``seconds`` of that CPU time.

    CPU time of the calling thread (OpenCV is held to one thread, so all its work
    is counted here) hardly moves when other processes compete for the cores,
    unlike wall-clock time.
    """
    call()
    call()
    count, start = 0, time.thread_time()
    while True:
        for _ in range(8):
            call()
        count += 8
        used = time.thread_time() - start
        if used >= seconds:
            return count / used


def threaded_rate(transform: Any, image: np.ndarray, threads: int, seconds: float) -> float:
    """Wall-clock images/s of ``threads`` threads sharing ``transform``, each with its own rng."""
    counts = [0] * threads
    stop = threading.Event()
    barrier = threading.Barrier(threads + 1)

    def work(slot: int) -> None:
        with _using(np.random.default_rng(slot)):
            barrier.wait()
            while not stop.is_set():
                transform.apply(image)
                counts[slot] += 1

    workers = [threading.Thread(target=work, args=(slot,)) for slot in range(threads)]
    for worker in workers:
        worker.start()
    barrier.wait()
    start = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for worker in workers:
        worker.join()
    return sum(counts) / (time.perf_counter() - start)


def tune_malloc() -> bool:
    """Keep freed memory in the process (glibc only); True if it took effect."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3
    return bool(mallopt(m_mmap_threshold, 32 << 20)) and bool(mallopt(m_trim_threshold, 64 << 20))


def measure(args: argparse.Namespace) -> tuple[list[dict], str]:
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (SIZE, SIZE, 3), dtype=np.uint8)
    from PIL import Image

    pil_image = Image.fromarray(image[:, :, ::-1])
    peers = torchvision_ops()
    peer_name = "torchvision" if peers is not None else "Pillow"
    peers = peers if peers is not None else pillow_ops(np.random.default_rng(1))
    transforms = ours()
    names = [n for n in transforms if not args.only or any(o in n for o in args.only.split(","))]
    best: dict[tuple[str, str], float] = {}
    for rep in range(args.reps):
        shift = rep % max(1, len(names))
        for name in names[shift:] + names[:shift]:
            candidates = [("ours", lambda t=transforms[name]: t.apply(image))]
            if name in peers:
                candidates.append(("peer", lambda f=peers[name]: f(pil_image)))
            with _using(np.random.default_rng(rep)):
                for column, call in candidates:
                    value = rate(call, args.seconds)
                    best[name, column] = max(best.get((name, column), 0.0), value)
            if args.threads > 1:
                value = threaded_rate(transforms[name], image, args.threads, args.seconds)
                best[name, "threads"] = max(best.get((name, "threads"), 0.0), value)
    rows = []
    for name in names:
        row = {"transform": name, "ours": best[name, "ours"], "peer": best.get((name, "peer"))}
        row["threads"] = best.get((name, "threads"))
        rows.append(row)
    return rows, peer_name


def table(rows: list[dict], peer: str, threads: int) -> str:
    header = ["transform", "ours (img/CPU-s)", f"{peer} (img/CPU-s)", f"ours / {peer}"]
    if threads > 1:
        header.append(f"ours, {threads} threads (img/s, wall)")
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for row in rows:
        cells = [f"`{row['transform']}`", f"{row['ours']:,.0f}"]
        if row["peer"]:
            cells += [f"{row['peer']:,.0f}", f"{row['ours'] / row['peer']:.1f}x"]
        else:
            cells += ["—", "—"]
        if threads > 1:
            cells.append(f"{row['threads']:,.0f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=0.3, help="CPU time per measurement")
    parser.add_argument("--reps", type=int, default=3, help="repetitions; the best is kept")
    parser.add_argument("--threads", type=int, default=2, help="last column's threads; 1: none")
    parser.add_argument("--only", default="", help="comma-separated substrings of row names")
    parser.add_argument("--cv2-threads", type=int, default=1, help="cv2.setNumThreads (default 1)")
    parser.add_argument("--tune-malloc", action="store_true", help="raise glibc malloc thresholds")
    args = parser.parse_args(argv)
    cv2.setNumThreads(args.cv2_threads)
    malloc = "glibc malloc tuned" if args.tune_malloc and tune_malloc() else "default malloc"
    rows, peer = measure(args)
    try:
        import torchvision  # noqa: F401

        note = "torchvision is importable: its transforms run on PIL images."
    except ImportError:
        note = (
            "torchvision is not importable here, so the peer column is plain Pillow doing the "
            "same operation (what torchvision runs on PIL images); '—' where Pillow has none."
        )
    load = os.getloadavg()[0]
    print(f"{SIZE}x{SIZE}x3 uint8, best of {args.reps} x {args.seconds} CPU-s, load {load:.1f}, "
          f"cv2 threads {args.cv2_threads}, {malloc}, {os.cpu_count()} CPUs, "
          f"cv2 {cv2.__version__}, numpy {np.__version__}")
    print(note)
    print()
    print(table(rows, peer, args.threads))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
