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

Usage: ``python -m benchmarks.vision [--seconds 0.3] [--reps 3] [--threads 2]
[--only Resize,Normalize] [--cv2-threads 1] [--tune-malloc]``. The rows are in ``vision_ops``.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from typing import Any, Callable, Sequence, TypeVar

import numpy as np

import cv2

from dataloader import ArrayDataset, DataLoader, SequentialSampler, batch_rng
from dataloader.transform import Transform

from .options import add_reps, add_seconds, new_parser
from .repetitions import rotations
from .vision_ops import SIZE, ours, pillow_ops, torchvision_ops

T = TypeVar("T")


class _Once(Transform):
    """Runs ``call`` once, as the transform of a loader's batch, and keeps what it returned."""

    def __init__(self, call: Callable[[], Any]) -> None:
        self.call, self.result = call, None

    def apply(self, input: Any) -> Any:
        if batch_rng() is not batch_rng():
            raise RuntimeError("bench vision: the loader installed no batch generator; "
                               "the transforms would each draw a new one")
        self.result = self.call()
        return input


def with_batch_rng(seed: int, call: Callable[[], T]) -> T:
    """``call()`` with ``batch_rng()`` one generator, seeded from ``seed``, for this thread.

    The public API installs a batch's generator only while a loader makes that batch, so
    ``call`` runs as the transform of the only batch of a serial loader, in this thread.
    Outside a loader each ``batch_rng()`` would seed a new generator, a cost that is no part
    of a transform's own.
    """
    once = _Once(call)
    dataset = ArrayDataset([0])
    sampler = SequentialSampler(dataset, batch_size=1)
    for _ in DataLoader(dataset, sampler, transform=once, num_workers=0, seed=seed):
        pass
    return once.result


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
    barrier = threading.Barrier(threads + 1, timeout=60)

    def loop(slot: int) -> None:
        barrier.wait()
        while not stop.is_set():
            transform.apply(image)
            counts[slot] += 1

    def work(slot: int) -> None:
        with_batch_rng(slot, lambda: loop(slot))

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
    """The best rate of each row's columns over the repetitions, and the peer's name."""
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
    for rep, name in rotations(args.reps, names):
        candidates = [("ours", lambda t=transforms[name]: t.apply(image))]
        if name in peers:
            candidates.append(("peer", lambda f=peers[name]: f(pil_image)))
        rates = with_batch_rng(rep, lambda: [(c, rate(call, args.seconds)) for c, call in candidates])
        for column, value in rates:
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
    """The rows as a Markdown table (docs/vision.md quotes it)."""
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


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: measure every row, print the machine, the peer and the table."""
    parser = new_parser(__doc__, "python -m benchmarks.vision")
    add_seconds(parser, 0.3, "CPU time per measurement")
    add_reps(parser, 3, "repetitions; the best is kept")
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
    sys.exit(main())
