"""Free threading: thread workers on free-threaded Python 3.14t against process workers, there
and on Python 3.14 with the GIL.

Three configurations per (workload, ``num_workers``): ``worker_type="thread"`` and
``worker_type="process"`` on 3.14t, and ``worker_type="process"`` on 3.14 (GIL), each run in
a fresh child of the interpreter it needs (``freethreading_runs.py`` finds them; this process
can be any Python). The workloads (``freethreading_workloads.py``): ``tiny``, ``images`` and
``decode`` from the main bench, and ``tokenize``, a per-sample transform in pure Python. A
run (``freethreading_child.py``) hands batches to a consumer for ``--warmup`` untimed seconds
after its first batch, then times ``--seconds`` more (samples/s), while the peak PSS of the child's process tree
(workers included) is sampled. Process workers use the interpreter's default start method
(``forkserver`` on 3.14) unless ``--start-method`` says otherwise. Repetitions run every
configuration once, the order rotating; ratios are paired within a repetition, medians over
repetitions (``freethreading_report.py`` has the targets).

Where an interpreter is not found, its rows are skipped and the output says so (exit 0); a
run that fails or outlives its time limit is shown with its error and makes the exit code 1.

Usage: ``python -m benchmarks.freethreading [--workloads tiny,images,decode,tokenize]
[--workers 2] [--reps 3] [--seconds 1.5] [--warmup 1] [--python-ft PATH] [--python-gil PATH]
[--start-method M] [--quick] [--json out.json] [-v]``: about 4 minutes on 2 cores;
``--workers 2,4,8,14`` on a 16-core machine; ``--quick`` (1 repetition of short runs on small
data) about 40 s.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from typing import Any, Sequence

from dataloader.argtypes import non_negative_float

from .freethreading_report import format_tables, headline, summarize
from .freethreading_runs import (
    CONFIGS, FT, GIL, Interpreter, Run, child_limit, find, probe, run_child,
)
from .freethreading_workloads import WORKLOADS
from .machine import machine
from .options import (
    add_json, add_quick, add_reps, add_seconds, add_workers, add_workloads, new_parser,
)
from .output import aligned, cell, write_json
from .repetitions import rotated

START_METHODS = ("fork", "spawn", "forkserver")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The options, checked; ``--quick``: 1 repetition, 0.3 s runs after 0.3 s, small data."""
    parser = new_parser(__doc__ or "", "python -m benchmarks.freethreading")
    add_workloads(parser, ",".join(WORKLOADS), tuple(WORKLOADS))
    add_workers(parser, [2], "num_workers values, comma-separated (default 2; 2,4,8,14 on 16 "
                "cores)")
    add_reps(parser, 3)
    add_seconds(parser, 1.5)
    parser.add_argument("--warmup", type=non_negative_float, default=1.0,
                        help="untimed seconds after the first batch of every run (default 1; "
                        "quick 0.3)")
    parser.add_argument("--python-ft", metavar="PATH",
                        help="the free-threaded Python 3.14t (default: found as .ci/run finds it)")
    parser.add_argument("--python-gil", metavar="PATH",
                        help="Python 3.14 with the GIL (default: found as .ci/run finds it)")
    parser.add_argument("--start-method", choices=START_METHODS,
                        help="process workers' start method (default: the interpreter's)")
    add_quick(parser, "1 repetition of 0.3 s runs after 0.3 s, on small data")
    add_json(parser, "also write the machine, interpreters, options, runs, rows and targets")
    parser.add_argument("-v", "--verbose", action="store_true", help="log every run to stderr")
    args = parser.parse_args(argv)
    if args.quick:
        given = set(argv if argv is not None else sys.argv[1:])
        args.reps = args.reps if "--reps" in given else 1
        args.seconds = args.seconds if "--seconds" in given else 0.3
        args.warmup = args.warmup if "--warmup" in given else 0.3
    if not args.workers or 0 in args.workers:
        parser.error("--workers: give counts >= 1 (threads and processes need workers)")
    return args


def interpreters(args: argparse.Namespace) -> tuple[dict[str, Interpreter], list[str]]:
    """The interpreters by role, and notes: those not found (their rows are skipped), and why."""
    found: dict[str, Interpreter] = {}
    notes = []
    for role, given, name in ((FT, args.python_ft, "--python-ft"),
                              (GIL, args.python_gil, "--python-gil")):
        if given:
            interpreter, why = probe(given, role, False)
            refused = [why] if interpreter is None else []
        else:
            interpreter, refused = find(role)
        if interpreter is not None:
            found[role] = interpreter
            continue
        wanted = "free-threaded Python 3.14t" if role == FT else "Python 3.14 (GIL)"
        tried = "; ".join(refused) or "none on the PATH, in pyenv or beside this checkout"
        notes.append(f"no {wanted} to run ({tried}): its rows are skipped; install it (e.g. "
                     f"../shared/python/install.sh, then a venv with numpy, Pillow, psutil, "
                     f"pyarrow) or pass {name} PATH")
    return found, notes


def run(args: argparse.Namespace, found: dict[str, Interpreter]) -> list[Run]:
    """Every run of every repetition, the order of workloads and configurations rotating."""
    configs = [c for c in CONFIGS if c.role in found]
    plan = [(workers, config) for workers in args.workers for config in configs]
    limit = child_limit(args.warmup, args.seconds)
    runs: list[Run] = []
    for rep in range(args.reps):
        for workload in rotated(list(args.workloads), rep):
            for workers, config in rotated(plan, rep):
                done = run_child(found[config.role],
                                 Run(workload, workers, config.role, config.worker_type, rep),
                                 args.warmup, args.seconds, args.quick, args.start_method, limit)
                runs.append(done)
                if args.verbose:
                    _log(done, config.label)
    return runs


def _log(done: Run, label: str) -> None:
    what = done.error or (f"{cell(done.rate, ',.0f')} samples/s, "
                          f"{cell(done.peak_pss_mib, ',.0f')} MiB, GIL "
                          f"{'on' if done.gil_enabled else 'off'}, others' CPUs "
                          f"{cell(done.others_cpus, '.2f')}")
    print(f"rep {done.rep} {done.workload} {label} num_workers={done.workers}: {what}",
          file=sys.stderr)


def ratios_table(ratios: list[dict[str, Any]]) -> str:
    """3.14t threads over 3.14t processes and over 3.14 processes, per workload and workers."""
    cells = [["workload", "workers", "threads/processes 3.14t", "PSS", "3.14t threads / 3.14 "
              "processes", "PSS"]]
    cells += [[r["workload"], str(r["workers"]), cell(r["vs_ft_processes"], ".2f"),
               cell(r["pss_vs_ft_processes"], ".2f"), cell(r["vs_gil_processes"], ".2f"),
               cell(r["pss_vs_gil_processes"], ".2f")] for r in ratios]
    return aligned(cells, "<>")


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: find the interpreters, run, print the tables and targets; 1 if a run
    failed."""
    args = parse_args(argv)
    found, notes = interpreters(args)
    for role in (FT, GIL):
        if role in found:
            print(f"{'3.14t' if role == FT else '3.14 '}: {found[role].describe()}")
    for note in notes:
        print(note)
    runs = run(args, found) if found else []
    rows, targets = summarize(runs)
    ratios = headline(rows)
    print(f"\n{args.reps} rep(s) of {args.seconds:g} s per run, {args.warmup:g} s after the "
          f"first batch; "
          f"num_workers {','.join(map(str, args.workers))}; process workers' start method: "
          f"{args.start_method or 'the interpreter default'}; medians, ratios paired within a "
          f"rep\n")
    if rows:
        print(format_tables(rows, targets, {name: w.what for name, w in WORKLOADS.items()}))
    if ratios:
        print("\nratios (3.14t threads over each; samples/s and peak PSS of the process tree)")
        print(ratios_table(ratios))
    failed = [r for r in runs if r.error]
    if failed:
        print(f"\n{len(failed)} run(s) failed; first: {failed[0].workload} "
              f"{failed[0].config.label} num_workers={failed[0].workers}: {failed[0].error}")
    if args.json:
        write_json(args.json, {
            "machine": machine(), "options": vars(args),
            "interpreters": {role: asdict(i) for role, i in found.items()}, "skipped": notes,
            "runs": [asdict(r) for r in runs], "rows": rows, "ratios": ratios,
            "targets": targets})
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
