"""Resume: what keeping track of the position costs (``DataLoader.state_dict()`` and its bookkeeping).

Two measurements, each against a target:

- ``cost``: the time of one ``loader.state_dict()`` call with 8 worker processes (fork) and
  ``prefetch_factor`` 16, on a dataset whose batch 0 sleeps so that the later batches pile up.
  With ``in_order=True`` the reorder buffer is full when batch 0 arrives (``held``: up to 127
  batches; those queued behind batch 0 on its own worker are not made yet): the state is timed
  ``--calls`` times then, and once after each batch while the buffer drains. With
  ``in_order=False`` the batches after 0 are handed out while it sleeps, so the state's list of
  batches handed out ahead (``above``) grows by one per call: the worst case for its size. Per
  case: the median, 99th percentile and maximum wall time, and the most CPU time one call used
  (``time.thread_time``: a call that waited for a core other processes held shows in the wall
  time only). Target: every call under 1 ms of CPU, and 99 % of them under 1 ms of wall time.
- ``throughput``: the loading rate with state tracking (always on) against the library before
  it existed, in one run. A git worktree of ``--baseline-ref`` is made in a temporary folder,
  and a copy of this checkout's ``dataloader`` package in another (edits made to the checkout
  meanwhile do not reach the runs); both are removed at the end. Each repetition runs the same
  small-sample workload (an ``ArrayDataset`` of ``--samples`` float32 scalars, batch 256,
  ``persistent_workers`` with workers) once with ``PYTHONPATH`` at the copy ("new") and once
  at the baseline ("old"), each in a fresh interpreter, in an order that alternates between
  repetitions. A run times whole epochs for ``--seconds`` after one warm-up epoch. Ratios
  new/old are formed within a repetition; the table quotes their median, minimum and maximum,
  the main process's CPU time per batch (less sensitive to other processes on a shared machine
  than the rate), and how many CPUs' worth of time other processes used during the runs. Each
  pair of runs first waits for a quiet machine (other processes under 0.3 CPUs), up to
  ``--patience`` seconds in all. Target: median ratio >= 0.99 on the rate.
- ``peer``: ``state_dict()`` between batches against torchdata's ``StatefulDataLoader`` (the
  loader that exists only for this), same dataset, 8 fork workers each, default prefetch, in
  one run; skipped with a line saying so where torchdata is not installed.

Usage: ``python -m benchmarks.resume [--parts cost,throughput,peer] [--calls 200] [--reps 9]
[--seconds 1.0] [--samples 200000] [--workers 0,2] [--baseline-ref 8ea22ad]
[--baseline-tree PATH] [--patience 120] [--json out.json] [--quick] [-v]``: about 1.5 minutes
on 2 cores, plus the waits; ``--quick``, about 10 s.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

ROOT = Path(__file__).resolve().parents[1]
# The state tracking this checkout adds was committed after this one.
BASELINE_REF = "8ea22ad"
PARTS = ("cost", "throughput", "peer")
TARGET_MS = 1.0
TARGET_RATIO = 0.99


# -- the child: one throughput run, against whichever library PYTHONPATH points at ------------


def child_throughput(workers: int, samples: int, batch_size: int, seconds: float) -> dict:
    """One run: the rate of whole epochs for ``seconds`` after a warm-up epoch, and the main
    process's CPU time per batch. Uses only what both versions have."""
    import numpy as np

    import dataloader
    from dataloader import ArrayDataset, DataLoader

    dataset = ArrayDataset(np.arange(samples, dtype=np.float32))
    loader = DataLoader(
        dataset, batch_size=batch_size, num_workers=workers, persistent_workers=workers > 0, seed=0
    )
    for _ in loader:  # warm-up: starts the workers, touches the data
        pass
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu_start = usage.ru_utime + usage.ru_stime
    start = time.perf_counter()
    count = batches = epochs = 0
    while True:
        for (x,) in loader:
            count += len(x)
            batches += 1
        epochs += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            break
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = usage.ru_utime + usage.ru_stime - cpu_start
    loader.close()
    return {
        "library": os.path.dirname(dataloader.__file__),
        "samples_per_s": count / elapsed,
        "epochs": epochs,
        "main_cpu_us_per_batch": cpu / batches * 1e6,
    }


# -- part (a): the cost of state_dict() ----------------------------------------------------------


def _reorder_held(iterator: Any) -> int | None:
    """Batches held in the epoch's reorder buffer (a probe of private parts; None if not found)."""
    stage = iterator
    for _ in range(16):
        reorder = getattr(stage, "_reorder", None)
        if reorder is not None:
            return len(reorder)
        stage = getattr(stage, "upstream", None)
        if stage is None:
            return None
    return None


def _timed_state(loader: Any) -> tuple[float, float, dict]:
    """One ``loader.state_dict()``: its wall time and this thread's CPU time (us), and the state.
    The CPU time leaves out the time the thread waited for a core that other processes held."""
    cpu, start = time.thread_time_ns(), time.perf_counter_ns()
    state = loader.state_dict()
    return (time.perf_counter_ns() - start) / 1e3, (time.thread_time_ns() - cpu) / 1e3, state


def _wall(timed: list[tuple[float, float, dict]]) -> dict:
    """Median, p99 and max of the calls' wall times (us)."""
    wall = sorted(t[0] for t in timed)
    return {"median_us": statistics.median(wall), "p99_us": wall[min(len(wall) - 1, int(0.99 * len(wall)))],
            "max_us": wall[-1]}


def _case(name: str, timed: list[tuple[float, float, dict]], held: int | None) -> dict:
    wall = _wall(timed)
    cpu = [t[1] for t in timed]
    state = timed[-1][2]
    return {
        "case": name,
        "calls": len(timed),
        "held": held,
        "above": len(state["above"]),
        **wall,
        "cpu_max_us": max(cpu),
        "state_bytes": len(json.dumps(state)),
        # Met when every call used < 1 ms of CPU and 99 % of them took < 1 ms of wall time: a
        # single wall-time spike on a shared machine is a wait for a core, not the call's cost.
        "met": max(cpu) < TARGET_MS * 1e3 and wall["p99_us"] < TARGET_MS * 1e3,
    }


def measure_cost(calls: int, workers: int = 8, prefetch_factor: int = 16, batch_size: int = 16) -> list[dict]:
    """state_dict() with a full reorder buffer (in_order=True) and a growing ``above`` list
    (in_order=False); see the module docstring."""
    import numpy as np

    from dataloader import DataLoader, Dataset

    class SlowFirst(Dataset):
        """Sample 0 (so batch 0) sleeps ``delay`` seconds; the rest come at once."""

        def __init__(self, size: int, delay: float) -> None:
            self.size, self.delay = size, delay

        def __len__(self) -> int:
            return self.size

        def __getitem__(self, index: int) -> Any:
            if index == 0:
                time.sleep(self.delay)
            return np.float32(index)

    def loader(delay: float, in_order: bool) -> Any:
        in_flight = workers * prefetch_factor
        size = batch_size * max(calls + in_flight + 8, 2 * in_flight)
        return DataLoader(
            SlowFirst(size, delay), batch_size=batch_size, num_workers=workers, worker_type="process",
            multiprocessing_context="fork", prefetch_factor=prefetch_factor, in_order=in_order, seed=0,
        )

    rows = []
    ordered = loader(delay=1.0, in_order=True)
    with iter(ordered) as batches:
        next(batches)  # batch 0, after the rest have been made and are held
        held = _reorder_held(batches)
        timed = [_timed_state(ordered) for _ in range(calls)]
        rows.append(_case("in_order=True, full reorder buffer", timed, held))
        draining = []
        for _ in range(workers * prefetch_factor - 1):
            next(batches)
            draining.append(_timed_state(ordered))
        rows.append(_case("in_order=True, after each batch as it drains", draining, None))

    unordered = loader(delay=3.0 + calls * 0.01, in_order=False)
    with iter(unordered) as batches:
        grown = []
        for _ in range(calls):
            next(batches)  # batches 1, 2, ... while batch 0 sleeps: each joins `above`
            grown.append(_timed_state(unordered))
        rows.append(_case("in_order=False, batch 0 pending (above grows)", grown, _reorder_held(batches)))
    return rows


def measure_peer(calls: int, workers: int = 8, batch_size: int = 16) -> list[dict]:
    """``state_dict()`` between batches of the same map dataset, ours against torchdata's
    ``StatefulDataLoader``, both with ``workers`` fork processes and their default prefetch, in
    one run: each call follows one ``next()``, after a warm-up of 2 x ``workers`` batches."""
    import pickle

    import numpy as np

    from dataloader import DataLoader

    class Floats:
        def __len__(self) -> int:
            return batch_size * (calls + 4 * workers + 8)

        def __getitem__(self, index: int) -> Any:
            return np.float32(index)

    try:
        from torchdata.stateful_dataloader import StatefulDataLoader
    except ImportError:
        print("peer: torchdata is not installed (pip install torchdata); skipped", file=sys.stderr)
        return []
    loaders = {
        "ours": DataLoader(Floats(), batch_size=batch_size, num_workers=workers, multiprocessing_context="fork", seed=0),
        "torchdata StatefulDataLoader": StatefulDataLoader(
            Floats(), batch_size=batch_size, num_workers=workers, multiprocessing_context="fork"
        ),
    }
    rows = []
    for name, loader in loaders.items():
        batches = iter(loader)
        for _ in range(2 * workers):
            next(batches)
        timed = []
        for _ in range(calls):
            next(batches)
            timed.append(_timed_state(loader))
        del batches
        wall = _wall(timed)
        rows.append({"loader": name, "calls": calls, "median_us": wall["median_us"], "p99_us": wall["p99_us"],
                     "state_bytes": len(pickle.dumps(timed[-1][2]))})
    peer = rows[-1]
    for row in rows:
        row["ratio_to_peer"] = row["median_us"] / peer["median_us"]
    return rows


def peer_table(rows: list[dict]) -> str:
    from benchmarks.output import aligned

    cells = [["loader", "calls", "median us", "p99 us", "state bytes (pickled)", "median / torchdata"]] + [
        [r["loader"], str(r["calls"]), f"{r['median_us']:.1f}", f"{r['p99_us']:.0f}", str(r["state_bytes"]),
         f"{r['ratio_to_peer']:.3f}"] for r in rows
    ]
    return aligned(cells, "<")


def cost_table(rows: list[dict]) -> str:
    from benchmarks.output import aligned, cell

    header = ["case", "calls", "held", "above", "median us", "p99 us", "max us", "CPU max us", "state bytes",
              "< 1 ms"]
    cells = [header] + [
        [r["case"], str(r["calls"]), cell(r["held"]), str(r["above"]),
         f"{r['median_us']:.0f}", f"{r['p99_us']:.0f}", f"{r['max_us']:.0f}", f"{r['cpu_max_us']:.0f}",
         str(r["state_bytes"]), "met" if r["met"] else "MISSED"]
        for r in rows
    ]
    return aligned(cells, "<")


# -- part (b): throughput against the baseline ---------------------------------------------------


def _run_child(tree: Path, workers: int, samples: int, seconds: float) -> dict:
    """One throughput run in a fresh interpreter that imports the library from ``tree``; adds
    the CPUs' worth of time other processes used meanwhile (``others_cpus``)."""
    from benchmarks.measure import CpuClock

    clock = CpuClock()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATALOADER_", "MGE_DATA_"))}
    env["PYTHONPATH"] = str(tree)
    command = [sys.executable, str(Path(__file__).resolve()), "--child",
               json.dumps({"workers": workers, "samples": samples, "batch_size": 256, "seconds": seconds})]
    done = subprocess.run(command, env=env, cwd=tempfile.gettempdir(), capture_output=True, text=True,
                          timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"the run with PYTHONPATH={tree} failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if Path(result["library"]).resolve() != (tree / "dataloader").resolve():
        raise RuntimeError(f"PYTHONPATH={tree} imported the library from {result['library']}")
    return {**result, "others_cpus": clock.stop()["others_cpus"]}


def measure_throughput(trees: dict[str, Path], workers: Sequence[int], reps: int, samples: int,
                       seconds: float, patience: float, verbose: bool) -> tuple[list[dict], list[dict]]:
    from operator import itemgetter

    from benchmarks.measure import wait_for_quiet
    from benchmarks.repetitions import paired, rotated

    runs = []
    for rep in range(reps):
        for n in workers:
            # Both runs of a pair start on a machine as quiet as ``patience`` allows.
            patience -= wait_for_quiet(max(0.0, patience))
            for version in rotated(("new", "old"), rep + n):
                result = _run_child(trees[version], n, samples, seconds)
                runs.append({"rep": rep, "workers": n, "version": version, **result})
                if verbose:
                    print(f"rep {rep} workers {n} {version}: {result['samples_per_s']:,.0f} samples/s, "
                          f"{result['main_cpu_us_per_batch']:.1f} us/batch, others' CPUs "
                          f"{result['others_cpus']:.2f}", file=sys.stderr)
    rows = []
    for n in workers:
        new = [r for r in runs if r["workers"] == n and r["version"] == "new"]
        old = {r["rep"]: r for r in runs if r["workers"] == n and r["version"] == "old"}
        ratios = paired(new, old, lambda a, b: a["samples_per_s"] / b["samples_per_s"], key=itemgetter("rep"))
        cpu = paired(new, old, lambda a, b: a["main_cpu_us_per_batch"] / b["main_cpu_us_per_batch"],
                     key=itemgetter("rep"))
        median_ratio = statistics.median(ratios)
        rows.append({
            "workers": n,
            "new_samples_per_s": statistics.median(r["samples_per_s"] for r in new),
            "old_samples_per_s": statistics.median(r["samples_per_s"] for r in old.values()),
            "ratio_median": median_ratio,
            "ratio_min": min(ratios),
            "ratio_max": max(ratios),
            "new_main_cpu_us_per_batch": statistics.median(r["main_cpu_us_per_batch"] for r in new),
            "old_main_cpu_us_per_batch": statistics.median(r["main_cpu_us_per_batch"] for r in old.values()),
            "cpu_ratio_median": statistics.median(cpu),
            "others_cpus_median": statistics.median(r["others_cpus"] for r in [*new, *old.values()]),
            "met": median_ratio >= TARGET_RATIO,
        })
    return runs, rows


def throughput_table(rows: list[dict]) -> str:
    from benchmarks.output import aligned

    header = ["num_workers", "new samples/s", "old samples/s", "new/old", "min", "max",
              "main CPU us/batch new", "old", "CPU new/old", "others' CPUs", ">= 0.99"]
    cells = [header] + [
        [str(r["workers"]), f"{r['new_samples_per_s']:,.0f}", f"{r['old_samples_per_s']:,.0f}",
         f"{r['ratio_median']:.3f}", f"{r['ratio_min']:.3f}", f"{r['ratio_max']:.3f}",
         f"{r['new_main_cpu_us_per_batch']:.1f}", f"{r['old_main_cpu_us_per_batch']:.1f}",
         f"{r['cpu_ratio_median']:.3f}", f"{r['others_cpus_median']:.2f}", "met" if r["met"] else "MISSED"]
        for r in rows
    ]
    return aligned(cells)


def baseline_tree(ref: str) -> Path:
    """A detached git worktree of ``ref`` in a fresh temporary folder."""
    folder = Path(tempfile.mkdtemp(prefix="dl-baseline-"))
    folder.rmdir()  # git wants to create it
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(folder), ref],
                   check=True)
    return folder


def remove_tree(folder: Path) -> None:
    subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(folder)], check=False)


def snapshot_checkout() -> Path:
    """A copy of this checkout's ``dataloader`` package in a fresh temporary folder: the runs of
    "new" all use the library as it was when the tool started, even if the checkout is edited
    meanwhile (uncommitted work included)."""
    folder = Path(tempfile.mkdtemp(prefix="dl-new-"))
    shutil.copytree(ROOT / "dataloader", folder / "dataloader",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return folder


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    from dataloader.argtypes import non_negative_float, positive_int

    from benchmarks.options import add_json, add_quick, add_reps, add_seconds, add_workers, comma_list, new_parser

    parser = new_parser(__doc__, "python -m benchmarks.resume")
    parser.add_argument("--parts", default=",".join(PARTS), type=comma_list(str.strip, PARTS, "part"),
                        help=f"comma-separated, among {','.join(PARTS)}")
    parser.add_argument("--calls", type=positive_int, default=None, help="state_dict() calls per case (default 200)")
    add_reps(parser, None, "throughput repetitions (default 9)")
    add_seconds(parser, None, "timed seconds per throughput run (default 1.0)")
    parser.add_argument("--samples", type=positive_int, default=None, help="dataset size (default 200000)")
    add_workers(parser, "0,2", "num_workers values of the throughput runs (default 0,2)")
    parser.add_argument("--baseline-ref", default=BASELINE_REF,
                        help=f"the commit before state tracking (default {BASELINE_REF})")
    parser.add_argument("--baseline-tree", metavar="PATH",
                        help="an existing checkout of the baseline, instead of a worktree of --baseline-ref")
    parser.add_argument("--patience", type=non_negative_float, default=None,
                        help="seconds to spend in all waiting for a quiet machine before pairs of "
                             "throughput runs (default 120, quick 0)")
    add_quick(parser, "a smoke run: few calls, 2 short repetitions")
    add_json(parser)
    parser.add_argument("-v", action="store_true", help="log every throughput run to stderr")
    args = parser.parse_args(argv)
    quick = args.quick
    args.calls = args.calls or (50 if quick else 200)
    args.reps = args.reps or (2 if quick else 9)
    args.seconds = args.seconds or (0.3 if quick else 1.0)
    args.samples = args.samples or (50_000 if quick else 200_000)
    if args.patience is None:
        args.patience = 0.0 if quick else 120.0
    return args


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--child"] and len(argv) == 2:
        # One throughput run (see _run_child): it imports the library PYTHONPATH points at and
        # nothing else of this checkout, so it reads its arguments without the parser.
        print(json.dumps(child_throughput(**json.loads(argv[1]))))
        return 0
    sys.path.insert(0, str(ROOT))  # this checkout's library and benchmarks, not an install
    args = parse_args(argv)
    result: dict[str, Any] = {"config": dict(vars(args))}
    if "cost" in args.parts:
        rows = measure_cost(args.calls)
        result["cost"] = rows
        print("state_dict() cost: 8 process workers (fork), prefetch_factor 16, batch 16; batch 0 sleeps")
        print(cost_table(rows))
        print()
    if "peer" in args.parts:
        rows = measure_peer(args.calls)
        result["peer"] = rows
        if rows:
            print("state_dict() between batches, 8 process workers (fork), batch 16: ours vs torchdata")
            print(peer_table(rows))
            print()
    if "throughput" in args.parts:
        made = None
        new = snapshot_checkout()
        try:
            if args.baseline_tree:
                old = Path(args.baseline_tree).resolve()
            else:
                old = made = baseline_tree(args.baseline_ref)
            runs, rows = measure_throughput({"new": new, "old": old}, args.workers, args.reps,
                                            args.samples, args.seconds, args.patience, args.v)
        finally:
            shutil.rmtree(new, ignore_errors=True)
            if made is not None:
                remove_tree(made)
        result["throughput"] = {"runs": runs, "rows": rows}
        ref = args.baseline_tree or args.baseline_ref
        print(f"throughput: this checkout (new) vs {ref} (old); ArrayDataset of {args.samples} float32 "
              f"scalars, batch 256; {args.reps} repetitions of {args.seconds:g} s runs, alternating")
        print(throughput_table(rows))
    if args.json:
        from benchmarks.output import write_json

        write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
