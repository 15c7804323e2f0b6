"""Ray Data as a source: what ``RayStream`` costs on top of Ray's own iterator.

One decode workload, rows/s, every contender in one process run, paired within each of
``--reps`` repetitions in a rotating order. ``--images`` 256x256 JPEGs in one Parquet file
(``image`` bytes, ``label``) are decoded (``cv2.imdecode``) and cropped to 160x160, batches of 32:

- ``ours alone``: ``ParquetStream`` rows, decoded in ``--workers`` (2) of this loader's workers
  (``parallel_stream=True``); no Ray.
- ``ray iter_batches``: ``ray.data.read_parquet(...).map_batches(decode)`` on a local Ray
  (``ray.init(num_cpus=--cpus)``), consumed with Ray's ``iter_batches`` in this process.
- ``RayStream + preload``: the same Ray dataset through ``RayStream(batch_size=32)`` and this
  loader (``StreamSampler()``, ``preload=True``).

And the same two Ray contenders over the decoded crops materialized in Ray's object store
(``materialized``): Ray then does no work while we read, so what ``RayStream`` and the loader add
per batch is all that differs. The overhead is ``rate(ray) / rate(RayStream) - 1``, paired within
a repetition (target: under 5% on the decode workload). Every run times whole epochs, after
one untimed epoch, until ``--seconds`` have passed, so each timed epoch pays its start once (Ray
starts its pipeline again each epoch); Ray's start-up (``ray.init``) is timed on its own and
left out of the rates.

Usage: ``python -m benchmarks.raydata [--images 2000] [--reps 5] [--seconds 4] [--workers 2]
[--cpus 2] [--quick] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterable, Iterator, Sequence

import numpy as np

from dataloader import DataLoader, RayStream, StreamSampler
from dataloader.columnar import ParquetStream

from dataloader.argtypes import worker_count
from .columnar import Run, batch_rows
from .columnar_contenders import IMAGE_BATCH
from .columnar_data import DecodeCrop, crop, write_files
from .machine import machine
from .options import add_json, add_quick, add_reps, add_seconds, new_parser
from .output import aligned, cell, write_json
from .repetitions import median, paired_median, rotations

DECODE, CACHED = "decode", "materialized"
ALONE, RAY, STREAM = "ours alone", "ray iter_batches", "RayStream + preload"
TARGET = 0.05  # RayStream's overhead over Ray's iterator, on the decode workload


def decode_crop(batch: dict) -> dict:
    """Ray's ``map_batches`` step: JPEG bytes -> 160x160 crops, seeded by the batch's labels."""
    import cv2

    rng = np.random.default_rng(int(batch["label"].sum()))
    images = [crop(cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR), rng)
              for data in batch["image"]]
    return {"image": np.stack(images), "label": batch["label"]}


@contextmanager
def ours(dataset: Any, sampler: Any, workers: int, **options: Any) -> Iterator[Callable[[], Iterable]]:
    """One epoch of our loader per call; the loader closed after the run."""
    loader = DataLoader(dataset, sampler, num_workers=workers, **options)
    try:
        yield lambda: iter(loader)
    finally:
        loader.close()


@contextmanager
def ray_alone(dataset: Any) -> Iterator[Callable[[], Iterable]]:
    """One epoch of Ray's own ``iter_batches`` per call, consumed in this process."""
    yield lambda: dataset.iter_batches(batch_size=IMAGE_BATCH, batch_format="numpy")


def ray_stream(dataset: Any) -> ContextManager[Callable[[], Iterable]]:
    """``RayStream`` over ``dataset`` through our loader, whole batches, with preload."""
    return ours(RayStream(dataset, batch_size=IMAGE_BATCH), StreamSampler(), 0, preload=True)


def contenders(files: Any, ray: Any, workers: int) -> list[tuple[str, str, Callable]]:
    """(workload, contender, open) for every run of a repetition."""
    read = ray.data.read_parquet(str(files.image_parquet))
    decoded = read.map_batches(decode_crop, batch_size=IMAGE_BATCH)
    cached = decoded.materialize()
    rows = ParquetStream(files.image_parquet)
    return [
        (DECODE, ALONE, lambda: ours(rows, StreamSampler(batch_size=IMAGE_BATCH), workers,
                                     transform=DecodeCrop(), parallel_stream=True)),
        (DECODE, RAY, lambda: ray_alone(decoded)),
        (DECODE, STREAM, lambda: ray_stream(decoded)),
        (CACHED, RAY, lambda: ray_alone(cached)),
        (CACHED, STREAM, lambda: ray_stream(cached)),
    ]


def measure_epochs(epoch: Callable[[], Iterable], seconds: float) -> tuple[float, int, float]:
    """(rows/s, rows, seconds) over whole epochs, after one untimed epoch, until ``seconds``
    have passed: every timed epoch pays its start once (Ray starts its pipeline again, our
    loader its workers), wherever a run would otherwise be cut."""
    for _ in epoch():
        pass
    rows = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        rows += sum(batch_rows(batch) for batch in epoch())
    elapsed = time.perf_counter() - start
    return rows / elapsed, rows, elapsed


def run_once(workload: str, contender: str, open_: Callable[[], ContextManager], rep: int,
             seconds: float) -> Run:
    with open_() as epoch:
        rate, rows, elapsed = measure_epochs(epoch, seconds)
    return Run(workload, contender, rep, rate, rows, elapsed)


def _rate(runs: Sequence[Run], workload: str, contender: str) -> float | None:
    return median(r.rows_per_s for r in runs if (r.workload, r.contender) == (workload, contender))


def summarize(runs: Sequence[Run]) -> list[dict]:
    """Per workload and contender: median rows/s; for RayStream, its paired overhead over Ray
    (as a fraction, and in microseconds per batch)."""
    rows = []
    for workload, contender in dict.fromkeys((r.workload, r.contender) for r in runs):
        row = {"workload": workload, "contender": contender,
               "rows_per_s": _rate(runs, workload, contender),
               "overhead": None, "overhead_us_per_batch": None}
        if contender == STREAM:
            group = [r for r in runs if (r.workload, r.contender) == (workload, STREAM)]
            base = {r.rep: r for r in runs if (r.workload, r.contender) == (workload, RAY)}
            row["overhead"] = paired_median(group, base, lambda r, b: b.rows_per_s / r.rows_per_s - 1)
            row["overhead_us_per_batch"] = paired_median(
                group, base, lambda r, b: (1 / r.rows_per_s - 1 / b.rows_per_s) * IMAGE_BATCH * 1e6)
        rows.append(row)
    return rows


def verdict(rows: list[dict]) -> str:
    """Whether RayStream's overhead on the decode workload is under :data:`TARGET`."""
    decode = [r for r in rows if (r["workload"], r["contender"]) == (DECODE, STREAM)]
    overhead = decode[0]["overhead"] if decode else None
    if overhead is None:
        return "RayStream overhead on decode: not measured"
    met = "met" if overhead < TARGET else "not met"
    return f"RayStream overhead on decode: {overhead:+.1%} (target < {TARGET:.0%}): {met}"


def format_table(rows: list[dict], startup: float) -> str:
    cells = [["workload", "contender", "rows/s", "overhead vs ray", "us/batch"]]
    cells += [[r["workload"], r["contender"], cell(r["rows_per_s"], ",.0f"), cell(r["overhead"], "+.1%"),
               cell(r["overhead_us_per_batch"], "+.0f")] for r in rows]
    startup_line = f"ray.init: {startup:.2f} s (not in the rates)"
    return "\n\n".join([aligned(cells, "<<"), verdict(rows), startup_line])


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The options, checked; ``--quick`` means 200 images, one repetition, 0.5 s runs."""
    parser = new_parser(__doc__, "python -m benchmarks.raydata")
    parser.add_argument("--images", type=int, help="JPEGs (default 2,000; quick 200)")
    add_reps(parser, 5)
    add_seconds(parser, 4.0, "measured seconds per run, whole epochs (default 4)")
    parser.add_argument("--workers", type=worker_count, default=2, help="num_workers of 'ours alone' (default 2)")
    parser.add_argument("--cpus", type=int, default=2, help="ray.init(num_cpus=...) (default 2)")
    add_quick(parser, "200 images, one repetition, 0.5 s per run")
    add_json(parser, "also write the machine, runs, rows and Ray's start-up here")
    args = parser.parse_args(argv)
    if args.quick:
        args.reps, args.seconds = 1, min(args.seconds, 0.5)
    args.images = args.images or (200 if args.quick else 2_000)
    if min(args.reps, args.workers, args.cpus) < 1 or args.seconds <= 0 or args.images < IMAGE_BATCH:
        parser.error(f"--reps, --workers and --cpus must be >= 1, --seconds > 0, and --images at least "
                     f"{IMAGE_BATCH}")
    return args


def start_ray(cpus: int) -> tuple[Any, float]:
    """A local Ray and the seconds ``ray.init`` took."""
    import ray

    start = time.perf_counter()
    ray.init(num_cpus=cpus, object_store_memory=512 * 2**20, include_dashboard=False,
             log_to_driver=False, configure_logging=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    return ray, time.perf_counter() - start


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: write the file, start Ray, run every contender of every repetition."""
    args = parse_args(argv)
    ray, startup = start_ray(args.cpus)
    runs = []
    try:
        with tempfile.TemporaryDirectory(prefix="bench-ray-") as directory:
            files = write_files(Path(directory), 1024, args.images)
            everyone = contenders(files, ray, args.workers)
            for rep, (workload, contender, open_) in rotations(args.reps, everyone):
                runs.append(run_once(workload, contender, open_, rep, args.seconds))
    finally:
        ray.shutdown()
    rows = summarize(runs)
    print(f"{args.images:,} JPEGs decoded and cropped, batches of {IMAGE_BATCH}, ray.init(num_cpus="
          f"{args.cpus}), {args.workers} worker(s) for 'ours alone', {args.reps} rep(s), "
          f"{args.seconds:g} s per run; medians, overheads paired within a rep")
    print(format_table(rows, startup))
    if args.json:
        write_json(args.json, {"machine": machine(), "options": vars(args), "ray_init_seconds": startup,
                               "runs": [vars(r) for r in runs], "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
