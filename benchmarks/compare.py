"""Benchmark this loader against ``torch.utils.data.DataLoader`` and against no loader at all.

Six workloads compare loaders, each for every ``num_workers`` asked for (default 0 and 2):

- ``tiny``: per-sample overhead. 2M samples of (float32[8], int), batches of 256.
- ``scalars``, ``record``, ``vector``: small samples, batches of 256: an (int, float) tuple of
  Python scalars; a dict of an int, a float, a bool and a short string; (float32[16], a NumPy
  int64). The table's "x serial" column is ours with workers over ours with none.
- ``images``: bandwidth. 3x224x224 uint8 images taken from a preallocated pool, batches of 64;
  making a sample costs nothing, so moving the batch from worker to consumer dominates.
- ``decode``: CPU work. 256 JPEGs encoded with Pillow at start-up and kept as bytes; each sample
  decodes one and crops it at random to 3x160x160 uint8, batches of 32.

Per workload and worker count, each repetition runs our loader, PyTorch's, the "no-loader"
baseline (one plain loop in this process making the same batches: the same ``dataset[i]``
calls, then ``np.stack``) and, for ``num_workers=n >= 2``, the "ideal" (n forked processes each
running that plain loop on its share, nothing sent anywhere: the most n workers could give on
this machine). The small-sample workloads also run, with 0 workers, "no-loader+collator": that
loop with our collator in place of ``np.stack``, the most its checks leave a serial loader.
The order rotates every repetition, so a drift of the noisy machine hits all
alike; ratios are formed within a repetition and the table quotes their medians.

Four more compare settings of our loader: ``preload`` (preload off and on against a consumer
whose step takes as long as loading a batch; num_workers 0 and 2), ``cv2`` and ``pyloop``
(thread against process workers, num_workers 2, on a transform that releases the GIL and on
one that holds it) and ``monitor`` (``DATALOADER_MONITOR=1`` against the default). Two more
compare the loaders (no ideal) on transforms whose library runs its own thread pool:
``matmul`` (NumPy, BLAS) and ``torchconv`` (a PyTorch convolution), num_workers 2. All twelve
run by default (cv2 where OpenCV is importable, torchconv where torch is): ~8.5 minutes on 2
quiet cores. The current figures are in docs/performance.md, the runs behind them in
benchmarks/LOG.md; the modules beside this
one hold the parts: ``workloads`` (datasets), ``loaders`` (the ways of making batches),
``measure`` (one run), ``schedule`` (all runs), ``summary`` (rows and targets), ``tables``
(text) and ``plot`` (``--plot``).

Usage: ``python -m benchmarks.compare [--quick] [--reps N] [--workloads tiny,images,...]
[--workers 0,2] [--seconds S] [--no-torch] [--json out.json] [--plot out.png] [-v]``, from
the root of a clone. From Python: ``run(BenchConfig(...))`` returns the table rows,
``report(config)`` everything, and ``main(argv)`` is the command line. The Parquet, Ray Data
and autotune benches are modules of their own (``python -m benchmarks`` lists them).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from dataclasses import asdict
from typing import Any, Callable, Sequence

from dataloader.argtypes import non_negative_float, writable_file
from dataloader.errors import DataLoaderError
from .config import BenchConfig
from .machine import machine, torch_version
from .measure import Measurement
from .options import (
    add_json, add_quick, add_reps, add_seconds, add_workers, add_workloads, new_parser,
)
from .output import write_json
from .repetitions import median
from .tables import format_report
from .schedule import measure_all
from .summary import summarize, targets
from .workloads import WORKLOADS, default_workloads, missing_module

def run(
    config: BenchConfig | None = None, log: Callable[[str], None] = lambda line: None
) -> list[dict]:
    """Measure and return the table rows (see :func:`summarize`)."""
    return report(config or BenchConfig(), log)["rows"]


def report(config: BenchConfig, log: Callable[[str], None] = lambda line: None) -> dict:
    """Everything a run produced: machine, config, checks, rows, targets and every run."""
    started = time.perf_counter()
    measured = measure_all(config, log)
    info = machine()
    rows = summarize(measured["runs"], measured["memcpy"], info["cpus_available"])
    return {
        "machine": info, "config": asdict(config), "torch": torch_version() is not None
        and config.use_torch, "checks": measured["checks"],
        "calibration": measured["calibration"],
        "memcpy_bytes_per_s": median(measured["memcpy"]), "memcpy_per_rep": measured["memcpy"],
        "rows": rows, "targets": targets(rows),
        "runs": [asdict(r) for r in measured["runs"]],
        "discarded_runs": [asdict(r) for r in measured["discarded"]],
        "wall_s": time.perf_counter() - started,
    }


# What a --json report holds at its top level, which --from-json reads back.
REPORT_KEYS: dict[str, type | tuple[type, ...]] = {
    "machine": dict, "config": dict, "torch": bool, "checks": dict, "memcpy_bytes_per_s": (int, float),
    "runs": list, "discarded_runs": list, "wall_s": (int, float),
}


class ReportFileError(ValueError):
    """A ``--from-json`` file is missing, unreadable or not a report of ``--json``."""


def resummarize(path: str) -> dict:
    """An earlier report with its rows and targets computed afresh from its runs; a file that
    is not one is :class:`ReportFileError` naming it and what is wrong."""
    result = _read_report(path)
    try:
        runs = [Measurement(**run) for run in result["runs"]]
    except TypeError as error:  # a run with fields missing, unknown or not an object
        raise ReportFileError(f"{path!r} holds runs this bench cannot read ({error}); "
                              "give a file that --json wrote") from None
    if not runs:
        raise ReportFileError(f"{path!r} holds no runs; give a file that --json wrote")
    memcpy = [result["memcpy_bytes_per_s"]] * (1 + max(r.rep for r in runs))
    memcpy = result.get("memcpy_per_rep") or memcpy
    result["rows"] = summarize(runs, memcpy, result["machine"].get("cpus_available") or 2)
    result["targets"] = targets(result["rows"])
    return result


def _read_report(path: str) -> dict[str, Any]:
    """The JSON object in ``path``, with the top-level keys of a report of the right types."""
    try:
        with open(path, encoding="utf-8") as handle:
            result: Any = json.load(handle)
    except OSError as error:
        raise ReportFileError(f"cannot read {path!r}: {error.strerror or error}") from None
    except ValueError as error:  # json.JSONDecodeError, UnicodeDecodeError
        raise ReportFileError(f"{path!r} is not JSON ({error}); give a file that --json wrote") from None
    if not isinstance(result, dict):
        raise ReportFileError(f"{path!r} holds a JSON {type(result).__name__}, not the object "
                              "--json writes; give a file that --json wrote")
    wrong = [key for key, kind in REPORT_KEYS.items() if not isinstance(result.get(key), kind)]
    if wrong:
        raise ReportFileError(f"{path!r} is not a report of --json: {', '.join(wrong)} missing "
                              "or of the wrong type; give a file that --json wrote")
    return result


def parse_args(argv: Sequence[str] | None) -> tuple[BenchConfig, argparse.Namespace]:
    """The configuration the command line asks for, and the parsed options."""
    parser = new_parser(__doc__, "python -m benchmarks.compare")
    add_quick(parser, "one short rep on small datasets")
    add_reps(parser, None, "repetitions (default 5, --quick 1)")
    add_seconds(parser, None, "measured seconds per run (default 1.5)")
    add_workloads(parser, None, None, f"comma-separated, among {','.join(WORKLOADS)} (default: all)")
    add_workers(parser, None, "num_workers values, comma-separated (default 0,2; given, it also "
                "replaces the own values of preload, cv2, pyloop, matmul and torchconv)")
    parser.add_argument("--no-torch", action="store_true", help="leave PyTorch's loader out")
    parser.add_argument(
        "--patience", type=non_negative_float, help="seconds to spend in all waiting for a quiet machine "
        "and re-measuring disturbed groups (default 150, --quick 0)")
    add_json(parser, "also write everything as JSON here")
    parser.add_argument("--plot", metavar="PNG", type=writable_file, help="also draw throughput and our loader's "
                        "stage times into this PNG (needs matplotlib)")
    parser.add_argument("--verbose", "-v", action="store_true", help="log every run to stderr")
    parser.add_argument(
        "--from-json", metavar="PATH", help="measure nothing: re-summarize the runs of an "
        "earlier --json file and print its table")
    args = parser.parse_args(argv)
    chosen = args.workloads or default_workloads()
    for name in [] if args.workloads else [w for w in WORKLOADS if w not in chosen]:
        print(f"bench: leaving {name} out: it needs {missing_module(name)}, which is not "
              "importable here", file=sys.stderr)
    overrides: dict[str, Any] = {
        "workloads": tuple(dict.fromkeys(chosen)),
        "workers": tuple(args.workers or (0, 2)),
        "own_workers": args.workers is None,
        "use_torch": not args.no_torch,
    }
    for name in ("reps", "seconds", "patience"):
        if getattr(args, name) is not None:
            overrides[name] = getattr(args, name)
    return (BenchConfig.quick(**overrides) if args.quick else BenchConfig(**overrides)), args


PROG = "python -m benchmarks.compare"


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: measure (or re-read ``--from-json``), print, and write what was asked.
    What the library refuses (a :class:`DataLoaderError`, such as
    a ``num_workers`` it does not allow) is one line on stderr and exit code 2, as a refused
    option is; ``-v`` adds its traceback."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return _dispatch(argv)
    except DataLoaderError as error:
        if "-v" in argv or "--verbose" in argv:
            traceback.print_exc()
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        print(f"{PROG}: error: {first}", file=sys.stderr)
        return 2


def _dispatch(argv: list[str]) -> int:
    """Parse, then measure or re-read, and report."""
    try:
        config, args = parse_args(argv)
    except ValueError as error:
        print(f"bench: {error}", file=sys.stderr)
        return 2
    if args.plot:
        from .plot import PlotUnavailable, pyplot

        try:
            pyplot()  # before measuring for minutes, not after
        except PlotUnavailable as error:
            print(f"bench: {error}", file=sys.stderr)
            return 2
    try:
        result = resummarize(args.from_json) if args.from_json else None
    except ReportFileError as error:
        print(f"{PROG}: error: --from-json: {error}", file=sys.stderr)
        return 2
    _run(config, args, result)
    return 0


def _run(config: BenchConfig, args: argparse.Namespace, result: dict[str, Any] | None) -> None:
    """Measure (unless ``result`` was read back), print, and write ``--json`` and ``--plot``."""
    quiet = lambda line: None
    log = (lambda line: print(line, file=sys.stderr, flush=True)) if args.verbose else quiet
    result = result or report(config, log)
    print(format_report(result))
    if args.json:
        write_json(args.json, result)
    if args.plot:
        from .plot import plot

        info = result["machine"]
        plot(result["rows"], args.plot, f"dataloader {info.get('dataloader_commit') or ''} on "
             f"{info['cpus_available']} CPUs ({info['cpu']}); medians of {result['config']['reps']}"
             " rep(s)")
        print(f"\nplot written to {args.plot}")



if __name__ == "__main__":
    sys.exit(main())
