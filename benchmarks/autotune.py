"""Autotuning: ``num_workers="auto"`` against a sweep of fixed ``num_workers``, per workload.

For each workload (``autotune_runs.py``: ``tiny``, ``images``, ``decode``, ``columnar``,
``slow-consumer``) it runs our loader with ``num_workers`` 0, 1, ... 2 x usable CPUs (the
default prefetch), then with ``num_workers="auto"``. Each run hands batches to the consumer
for ``--warmup`` untimed seconds, then times ``--seconds`` more (samples/s), while the peak
PSS of the process tree is sampled; for auto it also reads ``loader.stats()``: the worker
count in use and the settle point (time and batch of the last ``stats().tuning`` record, 0
where there is none). Repetitions run every (workload, setting) in a rotating order.

The targets, per workload (``autotune_report.py``): auto's samples/s >= 0.95x the best fixed
setting's; >= 1.2x num_workers=0 where the workload is loader-bound (its best fixed setting
>= 1.2x num_workers=0; "n/a" otherwise); auto's peak tree PSS <= the best fixed setting's
+10%; settled within 2 s or 200 batches. Ratios are paired within a repetition, medians
over repetitions. A run that raises is reported with its error (exit code 1).

Usage: ``python -m benchmarks.autotune [--workloads tiny,decode] [--workers 0,1,2]
[--reps 3] [--seconds 1.5] [--warmup 2] [--quick] [--json out.json] [-v]``:
about 4.5 minutes on 2 cores; ``--quick`` (1 repetition of short runs on small data) about
30 s.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any, Sequence

from dataloader.memory import available_cpus

from dataloader.argtypes import non_negative_float
from .autotune_report import format_tables, summarize
from .autotune_runs import WORKLOADS, Run, missing, run_once, settings
from .machine import machine
from .measure import TreeMemorySampler
from .options import (
    add_json, add_quick, add_reps, add_seconds, add_workers, add_workloads, new_parser,
)
from .output import write_json
from .repetitions import rotated


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The options, checked; ``--quick``: 1 repetition, 0.25 s runs after 0.2 s, small data."""
    parser = new_parser(__doc__ or "", "python -m benchmarks.autotune")
    add_workloads(parser, ",".join(WORKLOADS), tuple(WORKLOADS))
    add_workers(parser, None, "fixed num_workers values, comma-separated (default 0 to 2 x "
                "usable CPUs)")
    add_reps(parser, 3)
    add_seconds(parser, 1.5)
    parser.add_argument("--warmup", type=non_negative_float, default=2.0,
                        help="untimed seconds at the start of every run (default 2, the time auto "
                        "has to settle; quick 0.2)")
    add_quick(parser, "1 repetition of 0.25 s runs after 0.2 s, on small data")
    add_json(parser, "also write the machine, options, runs, rows and targets here")
    parser.add_argument("-v", "--verbose", action="store_true", help="log every run to stderr")
    args = parser.parse_args(argv)
    if args.quick:
        given = set(argv or sys.argv[1:])
        args.reps = args.reps if "--reps" in given else 1
        args.seconds = args.seconds if "--seconds" in given else 0.25
        args.warmup = args.warmup if "--warmup" in given else 0.2
    if args.workers is None:
        args.workers = list(range(2 * available_cpus() + 1))
    if args.reps < 1 or args.seconds <= 0 or args.warmup < 0 or any(n < 0 for n in args.workers):
        parser.error("--reps must be >= 1, --seconds > 0, --warmup >= 0 and --workers >= 0")
    return args


def run(args: argparse.Namespace) -> tuple[list[Run], list[str]]:
    """Every run of every repetition (workloads and settings rotating); the skipped workloads."""
    chosen = [WORKLOADS[name] for name in args.workloads]
    skipped = [f"{w.name} ({w.needs} is not importable)" for w in chosen if missing(w)]
    present = [w for w in chosen if not missing(w)]
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="bench-autotune-") as directory:
        sources = {w.name: w.source(args.quick, Path(directory)) for w in present}
        with TreeMemorySampler() as sampler:
            for rep in range(args.reps):
                for workload in rotated(present, rep):
                    for setting in rotated(settings(args.workers), rep):
                        done = run_once(workload, sources[workload.name], setting, rep,
                                        args.warmup, args.seconds, sampler)
                        runs.append(done)
                        if args.verbose:
                            _log(done)
    return runs, skipped


def _log(done: Run) -> None:
    what = done.error or (f"{done.rate:,.0f} samples/s, {done.peak_pss_mib:,.0f} MiB, "
                          f"workers {done.num_workers}, others' CPUs {done.others_cpus:.2f}")
    print(f"rep {done.rep} {done.workload} num_workers={done.setting}: {what}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: run, print a table per workload and the targets; 1 if a run raised."""
    args = parse_args(argv)
    runs, skipped = run(args)
    rows, targets = summarize(runs)
    print(f"{available_cpus()} usable CPU(s); {args.reps} rep(s) of {args.seconds:g} s per run "
          f"after {args.warmup:g} s; fixed num_workers {','.join(map(str, args.workers))} "
          f"(default prefetch) and auto; medians, ratios paired within a rep\n")
    print(format_tables(rows, targets, {name: w.what for name, w in WORKLOADS.items()}))
    for note in skipped:
        print(f"skipped {note}")
    failed = [r for r in runs if r.error]
    if failed:
        print(f"{len(failed)} run(s) raised; first: {failed[0].workload} "
              f"num_workers={failed[0].setting}: {failed[0].error}")
    if args.json:
        result: dict[str, Any] = {"machine": machine(), "options": vars(args),
                                  "runs": [asdict(r) for r in runs], "rows": rows,
                                  "targets": targets, "skipped": skipped}
        write_json(args.json, result)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
