"""The floor of a process transport: how fast can worker processes hand batches over at all?

``python -m benchmarks.compare`` compares this loader with PyTorch's and with no loader. This tool asks
what is left between our loader and the machine: it runs, paired within each repetition,

- ``no-loader``: the plain loop in the main process (the denominator of every ratio);
- ``floor``: ``--workers`` forked processes, each stacking its batches into shared-memory
  segments it reuses (memfd, mapped before the fork) and naming the finished one in 5 bytes
  through a pipe; the main process hands batches out in order as views of the segments and
  frees each when it hands out the next. Nothing is pickled and nothing is checked: the least
  a zero-copy process transport costs on this machine;
- ``floor+main``: the same, with the main process spending ``--main-us`` of CPU per batch, as
  a loader's own bookkeeping in the main process would;
- ``ours``: ``DataLoader(num_workers=--workers)``.

For ``floor`` and ``ours`` it also reports the CPU time per batch of the main process and of
the workers, so the difference between them is the price of what the loader does besides
copying (messages, seeding, collating, bookkeeping). Workloads are the CPU bench's ``tiny``
and ``images`` (``workloads``); the workers are in ``floor_workers``. The consumer is the
bench's ``touch``, followed with ``--step-us`` by that much CPU per batch: a training step
slower than the loader, so that each batch is made before it is asked for. The step's CPU is not counted in ``main us/batch``.

Usage: ``python -m benchmarks.floor [--workloads images,tiny] [--workers 2] [--reps 3]
[--seconds 1.5] [--main-us 200] [--step-us 0] [--loaders no-loader,floor,floor+main,ours]
[--json out.json]``.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np
import psutil

from dataloader import Dataset

from dataloader.argtypes import non_negative_float, worker_count
from .batches import plain_batches, touch
from .floor_workers import PREFETCH, FloorWorkers, spend
from .loaders import random_loader
from .options import add_json, add_quick, add_reps, add_seconds, add_workloads, new_parser
from .output import aligned, cell, write_runs
from .repetitions import median, paired_median, rotated
from .workloads import WORKLOADS

NO_LOADER, FLOOR, FLOOR_MAIN, OURS = "no-loader", "floor", "floor+main", "ours"
RUNS = (NO_LOADER, FLOOR, FLOOR_MAIN, OURS)
WARMUP_BATCHES = 10


@dataclass
class Run:
    workload: str
    loader: str
    rep: int
    samples_per_s: float
    main_us_per_batch: float | None = None
    workers_us_per_batch: float | None = None


def _measure(batches: Iterator, batch_size: int, seconds: float, limit: int,
             step: float = 0.0) -> tuple[float, float, float]:
    """(samples/s, main CPU us per batch, workers' CPU us per batch) after a warm-up, over at
    most ``limit`` batches (so the workers are still there when the CPU times are read). The
    consumer spends ``step`` s of CPU on each batch, which the main CPU figure leaves out."""
    for _ in range(WARMUP_BATCHES):
        touch(next(batches))
    me = psutil.Process()
    children = me.children(recursive=True)
    # The workers' CPU comes from psutil, in clock ticks (10 ms); the main process's from
    # process_time, exact enough to subtract a step from it even in a short run.
    cpu = lambda procs: sum(sum(p.cpu_times()[:2]) for p in procs)  # noqa: E731
    main0, kids0, start, count = time.process_time(), cpu(children), time.perf_counter(), 0
    for batch in batches:
        touch(batch)
        if step:
            spend(step)
        count += 1
        if count >= limit or time.perf_counter() - start >= seconds:
            break
    elapsed = time.perf_counter() - start
    main1, kids1 = time.process_time(), cpu(children)
    main_us, workers_us = ((main1 - main0) / count - step) * 1e6, (kids1 - kids0) / count * 1e6
    return count * batch_size / elapsed, main_us, workers_us


@functools.lru_cache(maxsize=None)
def _dataset(workload: str, small: bool) -> Dataset:
    """One dataset per workload for the whole run (the image pool takes a while to make)."""
    return WORKLOADS[workload].make(small)


def run_once(workload: str, loader: str, rep: int, workers: int, seconds: float, main_us: float,
             small: bool = False, step_us: float = 0.0) -> Run:
    """One run of ``loader`` on ``workload``, its order drawn from ``rep``."""
    spec = WORKLOADS[workload]
    dataset = _dataset(workload, small)
    order = np.random.default_rng(rep).permutation(len(dataset)).tolist()
    limit = len(order) // spec.batch_size - WARMUP_BATCHES - (PREFETCH + 1) * workers
    measure = functools.partial(_measure, batch_size=spec.batch_size, seconds=seconds, limit=limit,
                                step=step_us / 1e6)
    if loader == NO_LOADER:
        plain = plain_batches(dataset, order, spec.batch_size, forever=True)
        rate, _, _ = measure(plain)
        return Run(workload, loader, rep, rate)
    if loader == OURS:
        ours = random_loader(dataset, spec.batch_size, workers, rep, prefetch_factor=PREFETCH)
        with iter(ours) as batches:
            rate, main, kids = measure(batches)
        return Run(workload, loader, rep, rate, main, kids)
    main_s = main_us if loader == FLOOR_MAIN else 0.0
    with FloorWorkers(dataset, order, spec.batch_size, workers, main_s) as floor:
        rate, main, kids = measure(iter(floor))
    return Run(workload, loader, rep, rate, main, kids)


def summarize(runs: Sequence[Run]) -> list[dict]:
    """One row per (workload, loader): median rate, median of the ratios to no-loader paired
    within each repetition, median CPU per batch."""
    rows = []
    for workload in dict.fromkeys(r.workload for r in runs):
        mine = [r for r in runs if r.workload == workload]
        base = {r.rep: r for r in mine if r.loader == NO_LOADER}
        for loader in RUNS:
            group = [r for r in mine if r.loader == loader]
            if not group:
                continue
            rows.append({
                "workload": workload, "loader": loader,
                "samples_per_s": median([r.samples_per_s for r in group]),
                "vs_no_loader": paired_median(
                    group, base, lambda r, b: r.samples_per_s / b.samples_per_s),
                "main_us_per_batch": median([r.main_us_per_batch for r in group]),
                "workers_us_per_batch": median([r.workers_us_per_batch for r in group]),
            })
    return rows


def format_table(rows: list[dict]) -> str:
    """The rows as a plain-text table (no rule under the header)."""
    cells = [["workload", "loader", "samples/s", "x no-loader", "main us/batch", "workers us/batch"]]
    cells += [[row["workload"], row["loader"], cell(row["samples_per_s"], ",.0f"),
               cell(row["vs_no_loader"], ".2f"), cell(row["main_us_per_batch"], ".0f"),
               cell(row["workers_us_per_batch"], ".0f")] for row in rows]
    return aligned(cells, "<<", widths=(8, 10, 10), rule=False)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The options, checked; ``--quick`` makes one repetition of at most 0.3 s per run."""
    parser = new_parser(__doc__, "python -m benchmarks.floor")
    add_workloads(parser, "images,tiny", ("images", "tiny"))
    parser.add_argument("--workers", type=worker_count, default=2,
                        help="the floor's processes, and our loader's num_workers (default 2)")
    add_reps(parser, 3)
    add_seconds(parser, 1.5, "measured seconds per run")
    parser.add_argument("--main-us", type=non_negative_float, default=200.0,
                        help="main-process CPU per batch in the floor+main run (default 200)")
    parser.add_argument("--step-us", type=non_negative_float, default=0.0,
                        help="CPU the consumer spends on each batch, a training step (default 0)")
    parser.add_argument("--loaders", default=",".join(RUNS),
                        help=f"comma-separated, among {','.join(RUNS)} (ratios need no-loader); "
                        "no-loader,ours with PYTHONPATH set to another checkout compares two versions")
    add_quick(parser, "small datasets, one short repetition")
    add_json(parser)
    args = parser.parse_args(argv)
    asked = [run for run in args.loaders.split(",") if run]
    unknown = sorted(set(asked) - set(RUNS))
    if unknown or not asked:
        parser.error(f"unknown or no loader(s) {unknown}: choose among {','.join(RUNS)}")
    args.loaders = tuple(run for run in RUNS if run in asked)
    if args.workers < 1 or args.reps < 1 or args.seconds <= 0 or args.main_us < 0 or args.step_us < 0:
        parser.error("--workers and --reps must be >= 1, --seconds > 0, --main-us and --step-us >= 0")
    if args.quick:
        args.reps, args.seconds = 1, min(args.seconds, 0.3)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: every run of every repetition, then the table (and ``--json``)."""
    args = parse_args(argv)
    runs = []
    for rep in range(args.reps):
        for workload in args.workloads:
            for loader in rotated(args.loaders, rep):  # no run always goes first
                runs.append(run_once(workload, loader, rep, args.workers, args.seconds,
                                     args.main_us, args.quick, args.step_us))
    rows = summarize(runs)
    step = f", a {args.step_us:g} us step per batch (not in main us/batch)" if args.step_us else ""
    print(f"{args.workers} worker(s), {args.reps} rep(s), {args.seconds:g} s per run, "
          f"floor+main spends {args.main_us:g} us per batch{step}; medians, ratios paired within a rep")
    print(format_table(rows))
    if args.json:
        write_runs(args.json, runs, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
