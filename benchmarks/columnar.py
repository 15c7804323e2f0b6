"""Columnar data: this loader's Parquet and Arrow readers against the plain reader and peers.

Three workloads, rows/s, every contender in one process run, ``--workers`` (2) workers where a
loader has workers, paired within each of ``--reps`` repetitions in a rotating order:

- ``tabular stream``: ``--rows`` rows x 4 numeric columns in Parquet (row groups of 65,536),
  batches of 1024. ``plain scan`` (``ParquetFile.iter_batches`` and ``to_numpy`` per column,
  in this process: the ceiling) against ``ParquetStream`` in our loader (``parallel_stream``;
  again with the tuned ``persistent_workers=True, prefetch_factor=4``; and with 0 workers),
  and against PyTorch's DataLoader over a map dataset doing ``table.take([i])`` per sample.
- ``random access``: the same rows as an uncompressed Arrow IPC file, random batches of 1024:
  ``ArrowDataset`` with a ``RandomSampler`` against Hugging Face ``datasets``
  (``Dataset.from_file(...).with_format("numpy")`` in PyTorch's DataLoader, ``shuffle=True``).
- ``image parquet``: ``--images`` 256x256 JPEGs, decoded and cropped to 160x160 in the
  workers, batches of 32: ``ImageFolder`` (files) against ``ParquetStream`` rows (one Parquet
  shard of the same bytes, written as ``python -m dataloader convert`` writes it) decoded by
  ``cv2.imdecode`` in the transform.

Our loaders and the plain scan run epoch after epoch (a new epoch starts its workers again,
unless persistent) for about ``--seconds``; PyTorch's and Hugging Face's, slower, run at most
``--batches`` batches of their first epoch. The first batches of a run are not timed. The
files are written once, in a temporary directory, before anything is timed.

Usage: ``python -m benchmarks.columnar [--rows 2000000] [--images 2000] [--reps 3]
[--seconds 2] [--batches 200] [--workers 2] [--quick] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from dataloader.argtypes import worker_count
from .columnar_contenders import (
    ARROW, FOLDER, HF, IMAGE_BATCH, IMAGES, OURS, PARQUET, PLAIN, RANDOM, ROW_BATCH, TABULAR, TORCH,
    TUNED, Contender, contenders, missing,
)
from .columnar_data import Files, write_files
from .machine import machine
from .options import add_json, add_quick, add_reps, add_seconds, new_parser
from .output import aligned, cell, write_json
from .repetitions import median, paired_median, rotations

WARMUP = 3  # untimed batches at the start of every run


@dataclass(frozen=True)
class Target:
    workload: str
    contender: str
    reference: str
    minimum: float  # contender's rows/s over reference's, paired within a repetition


@dataclass
class Run:
    workload: str
    contender: str
    rep: int
    rows_per_s: float
    rows: int
    seconds: float


REFERENCES = {TABULAR: PLAIN, RANDOM: HF, IMAGES: FOLDER}
TARGETS = (
    Target(TABULAR, OURS, PLAIN, 0.8), Target(TABULAR, OURS, TORCH, 5.0),
    Target(TABULAR, TUNED, PLAIN, 0.8), Target(TABULAR, TUNED, TORCH, 5.0),
    Target(RANDOM, ARROW, HF, 3.0), Target(IMAGES, PARQUET, FOLDER, 0.9),
)


def batch_rows(batch: Any) -> int:
    """Rows in a batch: a dict of columns, or a (images, labels) pair."""
    first = next(iter(batch.values())) if isinstance(batch, dict) else batch[0]
    return len(first)


def measure(batches: Iterator, seconds: float, limit: int | None) -> tuple[float, int, float]:
    """(rows/s, rows, seconds) after ``WARMUP`` untimed batches, over ``seconds`` or at most
    ``limit`` batches, or until the batches run out."""
    for _ in range(WARMUP):
        next(batches)
    count = rows = 0
    start = time.perf_counter()
    for batch in batches:
        rows += batch_rows(batch)
        count += 1
        if (limit is not None and count >= limit) or time.perf_counter() - start >= seconds:
            break
    elapsed = time.perf_counter() - start
    return rows / elapsed, rows, elapsed


def run_once(contender: Contender, files: Files, rep: int, args: argparse.Namespace) -> Run:
    with contender.open(files, args.workers) as batches:
        limit = args.batches if contender.bounded else None
        rate, rows, elapsed = measure(batches, args.seconds, limit)
    return Run(contender.workload, contender.name, rep, rate, rows, elapsed)


def evaluate(ratio: float | None, minimum: float) -> str:
    """"met", "not met", or "-" when the ratio could not be measured."""
    if ratio is None:
        return "-"
    return "met" if ratio >= minimum else "not met"


def _ratio(runs: Sequence[Run], workload: str, contender: str, reference: str) -> float | None:
    group = [r for r in runs if r.workload == workload and r.contender == contender]
    base = {r.rep: r for r in runs if r.workload == workload and r.contender == reference}
    return paired_median(group, base, lambda r, b: r.rows_per_s / b.rows_per_s)


def summarize(runs: Sequence[Run]) -> tuple[list[dict], list[dict]]:
    """Rows per contender (median rows/s, paired ratio to the workload's reference), and the
    targets with their paired ratios and verdicts."""
    rows = []
    for workload, contender in dict.fromkeys((r.workload, r.contender) for r in runs):
        reference = REFERENCES[workload]
        rows.append({
            "workload": workload, "contender": contender, "reference": reference,
            "rows_per_s": median([r.rows_per_s for r in runs
                                  if r.workload == workload and r.contender == contender]),
            "vs_reference": _ratio(runs, workload, contender, reference),
        })
    targets = []
    for t in TARGETS:
        ratio = _ratio(runs, t.workload, t.contender, t.reference)
        targets.append({"workload": t.workload, "contender": t.contender, "reference": t.reference,
                        "ratio": ratio, "target": t.minimum, "verdict": evaluate(ratio, t.minimum)})
    return rows, targets


def format_tables(rows: list[dict], targets: list[dict], skipped: Sequence[str] = ()) -> str:
    """The contenders' table, then the targets' table, then a note per skipped contender."""
    cells = [["workload", "contender", "rows/s", "x reference", "reference"]]
    cells += [[r["workload"], r["contender"], cell(r["rows_per_s"], ",.0f"),
               cell(r["vs_reference"], ".2f"), r["reference"]] for r in rows]
    goals = [["workload", "contender", "over", "ratio", "target", "verdict"]]
    goals += [[t["workload"], t["contender"], t["reference"], cell(t["ratio"], ".2f"),
               f">= {t['target']:g}", t["verdict"]] for t in targets]
    notes = "\n".join(f"skipped {name}: {why}" for name, why in skipped)
    parts = (aligned(cells, "<<>><"), aligned(goals, "<<<>><"), notes)
    return "\n\n".join(part for part in parts if part)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The options, checked; ``--quick`` means 100,000 rows, 200 images, one repetition."""
    parser = new_parser(__doc__, "python -m benchmarks.columnar")
    parser.add_argument("--rows", type=int, help="tabular rows (default 2,000,000; quick 100,000)")
    parser.add_argument("--images", type=int, help="JPEGs (default 2,000; quick 200)")
    add_reps(parser, 3)
    add_seconds(parser, 2.0, "measured seconds per run (default 2)")
    parser.add_argument("--batches", type=int, default=200,
                        help="at most this many batches of PyTorch's and Hugging Face's loaders "
                        "(default 200)")
    parser.add_argument("--workers", type=worker_count, default=2,
                        help="num_workers of every loader with workers (default 2)")
    add_quick(parser, "small files, one repetition")
    add_json(parser, "also write the machine, runs, rows and targets here")
    args = parser.parse_args(argv)
    if args.quick:
        args.reps = 1
    args.rows = args.rows or (100_000 if args.quick else 2_000_000)
    args.images = args.images or (200 if args.quick else 2_000)
    small = min(args.rows // ROW_BATCH, args.images // IMAGE_BATCH)
    positive = min(args.reps, args.batches, args.workers) >= 1 and args.seconds > 0
    if not positive or small < 2 * WARMUP:
        parser.error(f"--reps, --batches and --workers must be >= 1, --seconds > 0, and --rows and "
                     f"--images enough for {2 * WARMUP} batches (of {ROW_BATCH} and {IMAGE_BATCH})")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: write the files, run every contender of every repetition, report."""
    args = parse_args(argv)
    everyone = contenders(args.workers)
    skipped = [(c.name, f"{c.needs} is not importable") for c in everyone if missing(c)]
    present = [c for c in everyone if not missing(c)]
    runs = []
    with tempfile.TemporaryDirectory(prefix="bench-columnar-") as directory:
        files = write_files(Path(directory), args.rows, args.images)
        for rep, contender in rotations(args.reps, present):
            runs.append(run_once(contender, files, rep, args))
    rows, targets = summarize(runs)
    print(f"{args.rows:,} rows, {args.images:,} images, {args.workers} worker(s), "
          f"{args.reps} rep(s), "
          f"{args.seconds:g} s per run (at most {args.batches} batches for torch and HF); "
          "medians, ratios paired within a rep")
    print(format_tables(rows, targets, skipped))
    if args.json:
        write_json(args.json, {"machine": machine(), "options": vars(args),
                               "runs": [vars(r) for r in runs], "rows": rows, "targets": targets})
    return 0


if __name__ == "__main__":
    sys.exit(main())
