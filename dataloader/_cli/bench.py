"""``python -m dataloader bench``: how fast this loader makes batches on this machine.

Three synthetic workloads: ``tiny`` (per-sample overhead: a float32[8] and an int, batches of
256), ``images`` (bandwidth: 3x224x224 uint8 arrays, batches of 64) and ``decode`` (CPU: a
Pillow JPEG decode and crop per sample, batches of 32; left out where Pillow is missing). Each
runs the plain loop (``dataset[i]`` and ``np.stack`` in this process, no loader), then this
loader with each ``--workers`` value and with ``num_workers="auto"``: samples/s after a short
warm-up, against the plain loop, and the peak memory of the process tree. About 30 s; ``--quick``
about 5 s. Your own dataset: ``python -m dataloader tune``; against other loaders, from a
clone: ``python -m benchmarks``.
"""

from __future__ import annotations

import argparse
import io
import math
import platform
import sys
from typing import Any, Callable, Iterator

import numpy as np

from .. import Dataset
from ..argtypes import positive_float_at_most, writable_file
from ..memory import PeakMemory, available_cpus
from ._table import aligned, cell, write_json
from ._timing import MOST_SECONDS, measure_loader, time_batches
from .tune import worker_list

PROG = "python -m dataloader bench"
PLAIN = "plain loop"
_MIB = 2.0**20
# (timed seconds, warm-up seconds, warm-up for auto, which starts small and grows for ~2 s)
_DEFAULT_TIMES, _QUICK_TIMES = (1.5, 0.5, 2.0), (0.25, 0.1, 0.4)


class _Tiny(Dataset):
    """(float32[8], int): almost no work per sample, so the loader's own cost shows."""

    def __init__(self, size: int) -> None:
        self.vectors = np.random.default_rng(0).standard_normal((size, 8), dtype=np.float32)

    def __getitem__(self, index: int) -> tuple[Any, int]:
        return self.vectors[index], index % 1000

    def __len__(self) -> int:
        return len(self.vectors)


class _Images(Dataset):
    """(uint8[3, 224, 224], int) from a pool of 64 images: moving the batch is all the work."""

    def __init__(self, size: int) -> None:
        self.pool = np.random.default_rng(1).integers(0, 256, (64, 3, 224, 224), dtype=np.uint8)
        self.size = size

    def __getitem__(self, index: int) -> tuple[Any, int]:
        return self.pool[index % len(self.pool)], index % 1000

    def __len__(self) -> int:
        return self.size


class _Decode(Dataset):
    """(uint8[160, 160, 3], int): one of 64 in-memory 256x256 JPEGs decoded with Pillow, cropped."""

    def __init__(self, size: int) -> None:
        from PIL import Image

        rng, self.size, self.blobs = np.random.default_rng(2), size, []
        for _ in range(64):  # smooth gradients plus noise: a photo's compression, not static's
            ramp = np.linspace(0, 200, 256, dtype=np.float32)
            pixels = ramp[:, None, None] + ramp[None, :, None] / 2 + rng.integers(0, 40, (256, 256, 3))
            out = io.BytesIO()
            Image.fromarray(pixels.clip(0, 255).astype(np.uint8)).save(out, "JPEG", quality=90)
            self.blobs.append(out.getvalue())

    def __getitem__(self, index: int) -> tuple[Any, int]:
        from PIL import Image

        image = np.asarray(Image.open(io.BytesIO(self.blobs[index % len(self.blobs)])).convert("RGB"))
        top, left = (index * 7) % 96, (index * 13) % 96
        return image[top:top + 160, left:left + 160], index % 1000

    def __len__(self) -> int:
        return self.size


# name -> (dataset class, batch size, samples in the dataset, samples with --quick)
WORKLOADS: dict[str, tuple[Callable[[int], Dataset], int, int, int]] = {
    "tiny": (_Tiny, 256, 1_000_000, 100_000),
    "images": (_Images, 64, 100_000, 10_000),
    "decode": (_Decode, 32, 20_000, 2_000),
}


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "bench", help="time this loader on synthetic workloads on this machine (~30 s)",
        description=__doc__.split("\n\n")[0].replace("``", ""),
        epilog="Your own dataset: python -m dataloader tune MODULE:FACTORY. Against other loaders, "
        "from a clone of the repository: python -m benchmarks.")
    parser.add_argument("--quick", action="store_true", help="shorter runs on smaller data (~5 s)")
    parser.add_argument("--seconds", type=positive_float_at_most(MOST_SECONDS), metavar="S",
                        help="timed seconds per run, after its warm-up (default 1.5; --quick 0.25; "
                        f"at most {MOST_SECONDS:g})")
    parser.add_argument("--workloads", type=_workload_list, default=list(WORKLOADS), metavar="A,B",
                        help=f"comma-separated, among {','.join(WORKLOADS)} (default: all; decode needs Pillow)")
    parser.add_argument("--workers", type=worker_list, default=[0, 2], metavar="N,N,...",
                        help="fixed num_workers values; num_workers='auto' runs as well (default 0,2)")
    parser.add_argument("--json", metavar="PATH", type=writable_file, help="also write every run here")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    seconds, warmup, auto_warmup = _QUICK_TIMES if args.quick else _DEFAULT_TIMES
    seconds = args.seconds or seconds
    workloads = [w for w in args.workloads if w != "decode" or _has_pillow()]
    if len(workloads) < len(args.workloads):
        print(f"{PROG}: leaving decode out: it needs Pillow (pip install pillow)", file=sys.stderr)
    if not workloads:
        print(f"{PROG}: error: no workload left to run", file=sys.stderr)
        return 2
    print(f"{PROG}: {available_cpus()} usable CPU(s), {_cpu_name()}; {seconds:g} s per run", flush=True)
    runs: list[dict[str, Any]] = []
    with PeakMemory() as memory:
        for name in workloads:
            make, batch_size, size, small = WORKLOADS[name]
            dataset = make(small if args.quick else size)
            runs.append(_plain(name, dataset, batch_size, seconds, warmup, memory))
            for workers in [*dict.fromkeys(args.workers), "auto"]:
                wait = auto_warmup if workers == "auto" else warmup
                runs.append(_ours(name, dataset, batch_size, workers, seconds, wait, memory))
    print(format_table(runs))
    print(advice(runs))
    problem = args.json and write_json(
        args.json, {"cpus": available_cpus(), "cpu": _cpu_name(), "seconds": seconds, "runs": runs})
    if problem:
        print(f"{PROG}: error: {problem}", file=sys.stderr)
    return 1 if problem or any(r["error"] for r in runs) else 0


def _plain(name: str, dataset: Any, batch_size: int, seconds: float, warmup: float,
           memory: PeakMemory) -> dict[str, Any]:
    """The plain loop: shuffled ``dataset[i]`` calls and ``np.stack`` per field, in this process."""

    def batches() -> Iterator[tuple[np.ndarray, ...]]:
        for epoch in range(1_000_000):
            order = np.random.default_rng(epoch).permutation(len(dataset))
            for start in range(0, len(order) - batch_size + 1, batch_size):
                samples = [dataset[int(i)] for i in order[start:start + batch_size]]
                yield tuple(np.stack([np.asarray(s[k]) for s in samples]) for k in range(len(samples[0])))

    memory.reset()
    rate, _ = time_batches(batches, seconds, warmup)
    memory.sample()
    return _row(name, PLAIN, None, rate=rate, peak_pss=memory.peak_pss)


def _ours(name: str, dataset: Any, batch_size: int, workers: int | str, seconds: float,
          warmup: float, memory: PeakMemory) -> dict[str, Any]:
    options = {"dataset": dataset, "batch_size": batch_size, "shuffle": True, "seed": 0,
               "num_workers": workers}
    try:
        got = measure_loader(options, seconds, memory, warmup, batch_size)
    except Exception as error:  # shown in its row; the other runs still go on
        return _row(name, f"num_workers={workers}", workers,
                    error=f"{type(error).__name__}: {error}".splitlines()[0])
    return _row(name, f"num_workers={workers}", workers, rate=got.rate, peak_pss=got.peak_pss,
                chosen=got.num_workers if workers == "auto" else None)


def _row(workload: str, setting: str, workers: int | str | None, rate: float | None = None,
         peak_pss: int | None = None, chosen: int | None = None, error: str | None = None) -> dict[str, Any]:
    return {"workload": workload, "setting": setting, "num_workers": workers,
            "samples_per_s": None if rate is None or math.isnan(rate) else rate,
            "peak_pss_mib": None if peak_pss is None else peak_pss / _MIB,
            "auto_chose": chosen, "error": error}


def _ratio(row: dict[str, Any], runs: list[dict[str, Any]]) -> float | None:
    """``row``'s rate over the plain loop's on its workload; None where either is missing."""
    plain = next(r for r in runs if r["workload"] == row["workload"] and r["setting"] == PLAIN)
    if row["samples_per_s"] is None or not plain["samples_per_s"]:
        return None
    return float(row["samples_per_s"] / plain["samples_per_s"])


def format_table(runs: list[dict[str, Any]]) -> str:
    """A row per run: samples/s, x the plain loop, peak MiB, and auto's choice or the error."""
    cells = [["workload", "setting", "samples/s", "x plain loop", "peak MiB", "note"]]
    for i, r in enumerate(runs):
        first = i == 0 or runs[i - 1]["workload"] != r["workload"]
        note = r["error"] or (f"settled on {r['auto_chose']} worker(s)" if r["auto_chose"] is not None else "")
        cells.append([r["workload"] if first else "", r["setting"], cell(r["samples_per_s"], ",.0f"),
                      cell(_ratio(r, runs), ".2f"), cell(r["peak_pss_mib"], ",.0f"), note])
    return aligned(cells, "<<>>><")


def advice(runs: list[dict[str, Any]]) -> str:
    """One line: the best setting per workload, and whether ``num_workers="auto"`` came close."""
    best: dict[str, dict[str, Any]] = {}
    auto_close = True
    for name in dict.fromkeys(r["workload"] for r in runs):
        ours = [r for r in runs if r["workload"] == name and r["num_workers"] is not None]
        measured = [r for r in ours if r["samples_per_s"] is not None]
        if not measured:
            continue
        best[name] = max(measured, key=lambda r: r["samples_per_s"])
        auto = next((r for r in measured if r["num_workers"] == "auto"), None)
        auto_close = auto_close and auto is not None and auto["samples_per_s"] >= 0.9 * best[name]["samples_per_s"]
    if not best:
        return "advice: nothing was measured; see the errors above."
    fastest = ", ".join(f"{name}: {r['setting']}" for name, r in best.items())
    if auto_close:
        return (f"advice: num_workers=\"auto\" came within 10% of the best setting on every workload "
                f"(best: {fastest}): start with it; time your own data with python -m dataloader tune.")
    return (f"advice: the best here was {fastest}; \"auto\" fell short on some, so time your own data "
            "with python -m dataloader tune MODULE:FACTORY before fixing num_workers.")


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            return next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")),
                        platform.processor() or "unknown CPU")
    except OSError:
        return platform.processor() or "unknown CPU"


def _has_pillow() -> bool:
    try:
        import PIL  # noqa: F401
    except ImportError:
        return False
    return True


def _workload_list(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in WORKLOADS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"expected workloads among {','.join(WORKLOADS)}; got {text!r}")
    return list(dict.fromkeys(names))

