"""Decode-bound training: JPEG decode + RandomResizedCrop(224) + flip, this loader against its peers.

On photo-like quality-90 JPEGs at three sizes (:mod:`benchmarks.decode_data`: ``256``
256x256, ``500`` 500x375 as ImageNet, ``1280`` 1280x960 as modern crawls), written once as an
ImageFolder under ``--data``, every contender reads each file, decodes it, cuts a random
window of 8-100% of its area and ratio 3/4-4/3, resizes it to 224x224, flips it left-right
half the time and hands over batches of 32 uint8 images, at each ``--workers`` count:
``ours`` (the fused ``DecodeRandomResizedCrop`` over ``ImageFolder(root, decode=False)``),
``ours-threads`` (the same with thread workers), ``ours-auto`` (the same with
``num_workers="auto"``, in the ``W=0`` column beside the peers' own defaults there: Grain's
``W=0`` runs 16 read threads), ``ours-unfused`` (``ImageFolder`` decoding
whole images, then ``RandomResizedCrop``), PyTorch's ``DataLoader`` with torchvision,
tf.data with its native ops, DALI's CPU pipeline, Grain and SPDL. What each one runs, decodes
with and hands over: :mod:`benchmarks.decode_contenders`' docstring. A run takes 4 warm-up
batches, then times one epoch's worth of batches (``--images`` / 32) of a continuous stream;
images/s is what the table gives, with ``ours / peer`` (the ratio of two runs of the same
repetition; medians over ``--reps``), the CPU time per image of the run's process tree, and
the targets: ``ours`` ahead of every peer at every set and worker count (and ``ours-auto`` in
the ``W=0`` column), and ``ours`` >= 1.5x ``ours-unfused`` on the 1280 set.

Each run is a child process (:mod:`benchmarks.decode_child`): the peers' thread
pools and runtimes never share a process with each other or with our forked workers, and a
peer that needs another interpreter gets one (``--python NAME=PATH``). A contender whose
package is missing or broken here is skipped with the reason printed; the run goes on. The
order of the contenders rotates from one repetition to the next.

The environment the full run was made in (Python 3.11)::

    python3 -m venv /work/venv-decode
    /work/venv-decode/bin/pip install -e '.[vision]'
    /work/venv-decode/bin/pip install torch==2.14.1 torchvision==0.29.1
    /work/venv-decode/bin/pip install tensorflow-cpu nvidia-dali-cuda120 grain spdl
    apt-get install libavutil57 libavcodec59 libavformat59 libavfilter8 libavdevice59 \\
        libswscale6 libswresample4    # SPDL's FFmpeg (5.1 on Debian 12); any of FFmpeg 4-8

All of them share one NumPy (2.x) there; DALI's CPU pipeline runs without a GPU.

Usage: ``python -m benchmarks.decode [--sets 256,500,1280] [--workers 0,2] [--images N]
[--reps N] [--contenders ...] [--data DIR] [--python NAME=PATH] [--quick] [--json PATH] [-v]``.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import signal
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

from dataloader.argtypes import positive_int

from . import decode_data as data
from .decode_child import COMMAND, RESULT
from .decode_contenders import AUTO, BY_NAME, OURS, UNFUSED, WARMUP_BATCHES, Contender
from .machine import machine
from .options import add_json, add_quick, add_reps, add_workers, comma_list, new_parser
from .output import cell, write_json
from .repetitions import median, paired_median, rotated

ROOT = Path(__file__).resolve().parents[1]
#: Images per set by default: 7-8 minutes for all sets, workers 0 and 2 and every peer on 2
#: cores (about 5 more the first time, writing the sets: 1.2 GB); a timed epoch takes 3-20 s.
DEFAULT_IMAGES = {"256": 8192, "500": 4096, "1280": 2048}
QUICK_IMAGES = 96
UNFUSED_TARGET = 1.5  # ours / ours-unfused on the 1280 set
#: The peers' distributions, for the record of versions.
DISTRIBUTIONS = ("torch", "torchvision", "tensorflow-cpu", "tensorflow", "nvidia-dali-cuda120",
                 "nvidia-dali-cuda130", "grain", "spdl", "opencv-python-headless", "opencv-python")


@dataclass
class Run:
    set: str
    workers: int
    contender: str
    rep: int
    images_per_s: float | None = None
    seconds: float | None = None
    cpu_ms_per_image: float | None = None
    shape: list = field(default_factory=list)
    error: str | None = None  # why the run failed (a child's exit code or timeout, its stderr)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The options; ``--quick``: the 256 set only, 96 images (3 timed batches)."""
    parser = new_parser(__doc__, "python -m benchmarks.decode")
    parser.add_argument("--sets", type=comma_list(str.strip, tuple(data.SETS), "set"),
                        help="image sizes, comma-separated (default 256,500,1280; quick 256)")
    add_workers(parser, [0, 2], "num_workers values, comma-separated (default 0,2)")
    parser.add_argument("--images", type=positive_int,
                        help="images per set, one timed epoch (default 8192, 4096, 2048 for "
                             f"256, 500, 1280; quick {QUICK_IMAGES}); at least 32")
    add_reps(parser, 1, "repetitions, the contenders' order rotating (default 1)")
    parser.add_argument("--contenders", type=comma_list(str.strip, tuple(BY_NAME), "contender"),
                        default=list(BY_NAME), help="comma-separated (default: all)")
    parser.add_argument("--data", type=Path, default=data.DEFAULT_DATA,
                        help=f"where the image sets are written and reused (default {data.DEFAULT_DATA})")
    parser.add_argument("--python", action="append", default=[], metavar="NAME=PATH",
                        help="run contender NAME's children with the interpreter PATH (repeatable)")
    add_quick(parser, "the 256 set, 96 images: a smoke run of seconds")
    add_json(parser, "also write the machine, options, sets, runs, rows and targets")
    parser.add_argument("-v", "--verbose", action="store_true", help="log every run to stderr")
    args = parser.parse_args(argv)
    args.sets = args.sets or (["256"] if args.quick else list(data.SETS))
    if args.images is not None and args.images < 32:
        parser.error("--images must be at least 32 (one batch)")
    pythons = {}
    for item in args.python:
        name, sep, path = item.partition("=")
        if not sep or name not in BY_NAME:
            parser.error(f"--python wants NAME=PATH with NAME among {','.join(BY_NAME)}; got {item!r}")
        pythons[name] = path
    args.python = pythons
    return args


def images_for(args: argparse.Namespace, name: str) -> int:
    return args.images or (QUICK_IMAGES if args.quick else DEFAULT_IMAGES[name])


def _child(python: str, argv: list[str], timeout: float) -> tuple[object, str | None]:
    """Run ``decode_child`` in ``python``; its ``RESULT`` value, or None and the error."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path,
           "TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2")}  # TF's info lines
    process = subprocess.Popen([python, "-c", COMMAND, *argv], cwd=ROOT, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # the child and any workers it started
        out, err = process.communicate()
        return None, f"timed out after {timeout:.0f} s (killed); its stderr: {_tail(err)}"
    for line in reversed(out.splitlines()):
        if line.startswith(RESULT):
            return json.loads(line[len(RESULT):]), None
    return None, f"exit code {process.returncode}: {_tail(err)}"


def _tail(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(no stderr)"


def check(contenders: Sequence[Contender], args: argparse.Namespace, jpeg: Path) -> dict[str, str]:
    """Why each contender that cannot run here cannot, asked of the interpreter it runs in
    (one child per interpreter)."""
    skipped: dict[str, str] = {}
    by_python: dict[str, list[str]] = {}
    for contender in contenders:
        by_python.setdefault(args.python.get(contender.name, sys.executable), []).append(contender.name)
    for python, names in by_python.items():
        reasons, error = _child(python, ["--check", str(jpeg), *names], timeout=300)
        if error:
            skipped.update({name: f"{python} could not be asked: {error}" for name in names})
        else:
            skipped.update(reasons)
    return skipped


def run_all(args: argparse.Namespace, roots: dict[str, Path], present: list[Contender],
            skipped: dict[str, str]) -> list[Run]:
    """Every (repetition, set, workers, contender) once, the contenders' order rotating."""
    runs: list[Run] = []
    for rep in range(args.reps):
        for name in args.sets:
            images = images_for(args, name)
            for workers in args.workers:
                chosen = [c for c in present if (workers > 0 or not c.workers_only)
                          and (workers == 0 or not c.serial_only)]
                for contender in rotated(chosen, rep):
                    if contender.name in skipped:  # found broken by an earlier run
                        continue
                    run = Run(name, workers, contender.name, rep)
                    result, error = _child(args.python.get(contender.name, sys.executable),
                                           [contender.name, str(roots[name]), str(workers), str(images)],
                                           timeout=120 + 0.25 * images)
                    if isinstance(result, dict) and "skipped" in result:
                        skipped[contender.name] = result["skipped"]
                        continue
                    if result is None:
                        run.error = error
                    else:
                        run.images_per_s, run.seconds = result["images_per_s"], result["seconds"]
                        run.cpu_ms_per_image, run.shape = result["cpu_ms_per_image"], result["shape"]
                    runs.append(run)
                    if args.verbose:
                        print(f"rep {rep} set {name} workers {workers} {contender.name}: "
                              f"{cell(run.images_per_s, ',.0f')} images/s {run.error or ''}",
                              file=sys.stderr, flush=True)
    return runs


def _select(runs: Sequence[Run], name: str, workers: int, contender: str) -> list[Run]:
    return [r for r in runs if (r.set, r.workers, r.contender) == (name, workers, contender)
            and r.images_per_s is not None]


def ratio(runs: Sequence[Run], name: str, workers: int, top: str, bottom: str) -> float | None:
    """Median over repetitions of ``top``'s images/s over ``bottom``'s in the same repetition."""
    base = {r.rep: r for r in _select(runs, name, workers, bottom)}
    return paired_median(_select(runs, name, workers, top), base,
                         lambda r, b: r.images_per_s / b.images_per_s)


def summarize(runs: Sequence[Run]) -> tuple[list[dict], list[dict]]:
    """A row per (set, workers, contender), and the targets per (set, workers)."""
    rows, targets = [], []
    for name, workers in dict.fromkeys((r.set, r.workers) for r in runs):
        for contender in dict.fromkeys(r.contender for r in runs if (r.set, r.workers) == (name, workers)):
            group = [r for r in runs if (r.set, r.workers, r.contender) == (name, workers, contender)]
            rows.append({
                "set": name, "workers": workers, "contender": contender,
                "images_per_s": median([r.images_per_s for r in group]),
                "cpu_ms_per_image": median([r.cpu_ms_per_image for r in group]),
                "ours_over": ratio(runs, name, workers, OURS, contender),
                "failed": next((r.error for r in group if r.error), None),
            })
        targets += _targets(rows, runs, name, workers)
    return rows, targets


def _targets(rows: list[dict], runs: Sequence[Run], name: str, workers: int) -> list[dict]:
    here = [r for r in rows if (r["set"], r["workers"]) == (name, workers)]
    peers = [r for r in here if not r["contender"].startswith(OURS) and r["ours_over"] is not None]
    worst = min(peers, key=lambda r: r["ours_over"], default=None)
    found = [{"set": name, "workers": workers, "target": "ours / every peer >= 1",
              "value": None if worst is None else worst["ours_over"],
              "against": None if worst is None else worst["contender"],
              "verdict": "-" if worst is None else "met" if worst["ours_over"] >= 1 else "not met"}]
    auto = [(ratio(runs, name, workers, AUTO, r["contender"]), r["contender"]) for r in peers]
    auto = [(value, peer) for value, peer in auto if value is not None]
    if auto:  # the W=0 column: ours-auto against each peer's own W=0 (Grain's is 16 threads)
        value, peer = min(auto)
        found.append({"set": name, "workers": workers, "target": "ours-auto / every peer >= 1",
                      "value": value, "against": peer, "verdict": "met" if value >= 1 else "not met"})
    unfused = ratio(runs, name, workers, OURS, UNFUSED)
    goal = UNFUSED_TARGET if name == "1280" else None
    found.append({"set": name, "workers": workers,
                  "target": f"ours / ours-unfused >= {goal:g}" if goal else "ours / ours-unfused",
                  "value": unfused, "against": UNFUSED,
                  "verdict": "-" if unfused is None or goal is None
                  else "met" if unfused >= goal else "not met"})
    return found


def markdown(cells: list[list[str]], align: str = "") -> str:
    """Rows of cells (the header first) as an aligned Markdown table. ``align`` has one
    character per column, ``<`` (left) or ``>`` (right); the columns after it are right-aligned,
    as :func:`benchmarks.output.aligned` has them."""
    width = [max(3, *(len(row[i]) for row in cells)) for i in range(len(cells[0]))]
    align = align.ljust(len(width), ">")

    def line(row: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) if a == "<" else c.rjust(w)
                                 for c, w, a in zip(row, width, align)) + " |"

    rule = "| " + " | ".join("-" * w if a == "<" else "-" * (w - 1) + ":"
                             for w, a in zip(width, align)) + " |"
    return "\n".join([line(cells[0]), rule, *map(line, cells[1:])])


def format_tables(rows: list[dict], targets: list[dict], sets: dict[str, dict],
                  workers: Sequence[int], skipped: dict[str, str]) -> str:
    """A Markdown table per set (contenders x worker counts), the targets, and a line per
    skipped or failed contender."""
    parts = []
    for name, described in sets.items():
        here = [r for r in rows if r["set"] == name]
        if not here:
            continue
        header = ["contender", "layout", "decoder"]
        for w in workers:
            header += [f"W={w} images/s", "ours / it", "CPU ms/image"]
        cells = [header]
        for contender in [name for name in BY_NAME if any(r["contender"] == name for r in here)]:
            line = [contender, BY_NAME[contender].layout, BY_NAME[contender].decoder]
            for w in workers:
                row = next((r for r in here if (r["workers"], r["contender"]) == (w, contender)), None)
                if row is None:
                    line += ["-", "-", "-"]
                elif row["images_per_s"] is None:
                    line += ["failed", "-", "-"]
                else:
                    line += [cell(row["images_per_s"], ",.0f"), cell(row["ours_over"], ".2f"),
                             cell(row["cpu_ms_per_image"], ".2f")]
            cells.append(line)
        title = (f"set {name}: {described['width']}x{described['height']}, {described['images']} "
                 f"images, {described['mean_kb']:.0f} KB mean ({described['min_kb']:.0f}-"
                 f"{described['max_kb']:.0f}), {described['bits_per_pixel']:.2f} bits/pixel")
        parts.append(title + "\n\n" + markdown(cells, "<<<"))
    goals = [["set", "workers", "target", "value", "against", "verdict"]]
    goals += [[t["set"], str(t["workers"]), t["target"], cell(t["value"], ".2f"), t["against"] or "-",
               t["verdict"]] for t in targets]
    parts.append("targets\n\n" + markdown(goals, "<><><<"))
    failures = [f"failed {r['contender']} (set {r['set']}, {r['workers']} workers): {r['failed']}"
                for r in rows if r["failed"]]
    notes = [f"skipped {name}: {why}" for name, why in skipped.items()] + failures
    if notes:
        parts.append("\n".join(notes))
    return "\n\n".join(parts)


def versions() -> dict[str, str]:
    """The installed versions of the peers' distributions in this interpreter."""
    found = {}
    for name in DISTRIBUTIONS:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return found


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: the image sets, the checks, every run, the report."""
    args = parse_args(argv)
    roots = {name: data.ensure_set(data.SETS[name], images_for(args, name), args.data)
             for name in args.sets}
    sets = {name: data.describe(root) for name, root in roots.items()}
    chosen = [BY_NAME[name] for name in args.contenders]
    skipped = check(chosen, args, data.files(next(iter(roots.values())))[0])
    present = [c for c in chosen if c.name not in skipped]
    runs = run_all(args, roots, present, skipped)
    rows, targets = summarize(runs)
    info = machine()
    peers = versions()
    print(f"machine: {info['cpu']}, {info['cpus_available']} usable CPUs, Python {info['python']}, "
          f"NumPy {info['numpy']}; {', '.join(f'{k} {v}' for k, v in peers.items())}")
    print(f"{args.reps} rep(s); {WARMUP_BATCHES} warm-up batches, then one epoch's worth of "
          "batches of 32 timed; ours / it: images/s ratio within a rep (median); CPU: the run's "
          "process tree")
    print(format_tables(rows, targets, sets, args.workers, skipped))
    if args.json:
        write_json(args.json, {
            "machine": {**info, "peers": peers, "pythons": args.python},
            "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
            "sets": sets, "skipped": skipped, "runs": [asdict(r) for r in runs], "rows": rows,
            "targets": targets})
    return 1 if any(r.error for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
