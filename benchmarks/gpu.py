"""Feeding a GPU: this loader's device copy and preload against PyTorch's DataLoader with pinned memory.

Every run hands batches to the same GPU step on ``cuda:0``: the image batch converted to
float and averaged (so the step depends on every byte of the copy), then ``--step-ms``
milliseconds of 2048x2048 matrix products that depend on that average, then ``.item()``,
the read of a loss that a training loop does every step. A batch that arrives late stalls
the step; a loader whose copy overlaps the step hides it.

Runs per (workload, num_workers, step), in an order that rotates every repetition; ratios
are paired within a repetition and the table quotes their medians:

- ``step-only``: the step on one batch already on the GPU: no loading at all (the ceiling).
- ``torch``: ``torch.utils.data.DataLoader(pin_memory=True)`` then ``x.cuda(non_blocking=True)``,
  PyTorch's documented recipe (its pin-memory thread copies each batch into pinned memory).
- ``ours``: ``DataLoader(device="cuda:0")``: pinned staging and a side-stream copy made in
  the consumer's thread.
- ``ours+preload``: ``preload=True``: the next batch staged and copied in a background thread
  while the step runs.

Workloads are the CPU bench's (``workloads``): ``images`` (uint8[3,224,224],
batch 64: 9.6 MB a batch, bandwidth) and ``decode`` (Pillow JPEG decode + random crop,
batch 32: CPU). Needs PyTorch with CUDA and a GPU; without one it says so and exits 2.

Usage: ``python -m benchmarks.gpu [--workloads images,decode] [--workers 2,4,8]
[--step-ms 0,4] [--reps 3] [--seconds 2] [--quick] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

from dataloader.argtypes import non_negative_float
from .loaders import close_iterator, random_loader, torch_loader
from .options import (
    add_json, add_quick, add_reps, add_seconds, add_workers, add_workloads, comma_list, new_parser,
)
from .output import aligned, cell, write_runs
from .repetitions import median, paired_median, rotations
from .workloads import WORKLOADS

STEP_ONLY, TORCH, OURS, PRELOAD = "step-only", "torch", "ours", "ours+preload"
RUNS = (STEP_ONLY, TORCH, OURS, PRELOAD)
DEVICE = "cuda:0"
WARMUP_BATCHES = 4


class GpuStep:
    """Average the image batch on the GPU, then ``count`` dependent 2048x2048 products, then read
    one number back (a loss's ``.item()``)."""

    SIDE = 2048

    def __init__(self, count: int) -> None:
        import torch

        self.count = max(0, int(count))
        self._torch = torch  # imported lazily: the module must load where torch is missing
        generator = torch.Generator(device=DEVICE).manual_seed(0)
        self._w = torch.randn(self.SIDE, self.SIDE, device=DEVICE, generator=generator) / self.SIDE**0.5
        self._a = torch.empty_like(self._w)
        self._b = torch.empty_like(self._w)

    def __call__(self, batch: Any) -> float:
        mean = batch[0].float().mean()
        if not self.count:
            return float(mean.item())
        self._torch.mul(self._w, mean / 255, out=self._a)
        a, b = self._a, self._b
        for _ in range(self.count):
            self._torch.matmul(a, self._w, out=b)
            a, b = b, a
        return float(a[0, 0].item())

    @classmethod
    def lasting(cls, milliseconds: float) -> "GpuStep":
        """A step of about ``milliseconds`` (the products' median time over 5 timings of 20)."""
        import torch

        if milliseconds <= 0:
            return cls(0)
        probe = cls(20)
        batch = (torch.zeros(1, device=DEVICE),)
        probe(batch)
        timings = []
        for _ in range(5):
            start = time.perf_counter()
            probe(batch)
            timings.append((time.perf_counter() - start) / probe.count)
        return cls(round(milliseconds / 1e3 / sorted(timings)[2]))


def _open(label: str, dataset: Any, batch_size: int, workers: int, seed: int) -> Iterator:
    """The batches of run ``label``, each already (or being) on the GPU."""
    if label == STEP_ONLY:
        first = next(_open(OURS, dataset, batch_size, 0, seed))
        return itertools.repeat(first)
    if label == TORCH:
        loader = torch_loader(dataset, batch_size, workers, seed, pin_memory=True)
        return (tuple(x.to(DEVICE, non_blocking=True) for x in batch) for batch in loader)
    loader = random_loader(dataset, batch_size, workers, seed, device=DEVICE,
                           preload=label == PRELOAD)
    return iter(loader)


@dataclass
class Run:
    workload: str
    label: str
    num_workers: int
    step_ms: float
    rep: int
    rate: float  # samples per second
    first_batch_s: float


def measure(label: str, workload: str, dataset: Any, workers: int, step: GpuStep, step_ms: float,
            rep: int, seconds: float, seed: int) -> Run:
    """Samples/s over ``seconds`` after the warm-up batches, and the time to the first batch."""
    import torch

    batch_size = WORKLOADS[workload].batch_size
    torch.cuda.synchronize()
    start = time.perf_counter()
    iterator = _open(label, dataset, batch_size, workers, seed + rep)
    try:
        step(next(iterator))
        first = time.perf_counter() - start
        for _ in range(WARMUP_BATCHES):
            step(next(iterator))
        count, begin = 0, time.perf_counter()
        while time.perf_counter() - begin < seconds:
            step(next(iterator))
            count += 1
        elapsed = time.perf_counter() - begin
    finally:
        close_iterator(iterator)
        del iterator
    return Run(workload, label, workers, step_ms, rep, count * batch_size / elapsed, first)


def summarize(runs: list[Run]) -> list[dict]:
    """One row per (workload, step, workers, run): median rate and paired ratios."""
    groups: dict[tuple, list[Run]] = {}
    for r in runs:
        groups.setdefault((r.workload, r.step_ms, r.num_workers, r.label), []).append(r)
    rows = []
    for (workload, step_ms, workers, label), group in groups.items():

        def paired(other: str) -> float | None:
            partners = {r.rep: r for r in groups.get((workload, step_ms, workers, other), [])}
            return paired_median(group, partners, lambda r, p: r.rate / p.rate)

        rows.append({
            "workload": workload, "step_ms": step_ms, "num_workers": workers, "loader": label,
            "samples_per_s": median([r.rate for r in group]),
            "of_ceiling": paired(STEP_ONLY), "vs_torch": paired(TORCH),
            "first_batch_ms": median([r.first_batch_s * 1e3 for r in group]),
        })
    return rows


def format_table(rows: list[dict]) -> str:
    """The rows as a plain-text table; ``vs torch`` is left blank on PyTorch's own rows."""
    cells = [["workload", "step ms", "workers", "loader", "samples/s", "of ceiling", "vs torch",
              "1st ms"]]
    cells += [[r["workload"], cell(r["step_ms"], "g"), cell(r["num_workers"]), r["loader"],
               cell(r["samples_per_s"], ".0f"), cell(r["of_ceiling"], ".2f"),
               cell(r["vs_torch"] if r["loader"] != TORCH else None, ".2f"),
               cell(r["first_batch_ms"], ".0f")] for r in rows]
    return aligned(cells, "<>><", widths=(8, 7, 7, 13, 10, 10, 8, 7), sep=" ")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The options; ``--quick`` makes one repetition of 0.3 s per run on small datasets."""
    parser = new_parser(__doc__, "python -m benchmarks.gpu")
    add_workloads(parser, "images,decode", ("images", "decode"))
    add_workers(parser, [2, 4, 8], "num_workers values, comma-separated (default 2,4,8)")
    parser.add_argument("--step-ms", type=comma_list(non_negative_float, what="step"), default=[0.0, 4.0],
                        help="GPU milliseconds per step, comma-separated (default 0,4)")
    add_reps(parser, 3)
    add_seconds(parser, 2.0)
    parser.add_argument("--seed", type=int, default=0, help="the loaders' seed (default 0)")
    add_quick(parser, "1 repetition of 0.3 s on small datasets")
    add_json(parser, "write the runs and rows to this file")
    args = parser.parse_args(argv)
    if args.quick:
        args.reps, args.seconds = 1, 0.3
    return args


def cuda_missing() -> str | None:
    """Why this benchmark cannot run here, or None."""
    try:
        import torch
    except ImportError:
        return "PyTorch is not installed (pip install 'dataloader[torch]' with a CUDA build)"
    if not torch.cuda.is_available():
        return f"torch {torch.__version__} sees no CUDA device (torch.cuda.is_available() is False)"
    return None


def main(argv: Sequence[str] | None = None, log: Callable[[str], None] = print) -> int:
    """The command line: exits 2 with the reason where there is no GPU to feed."""
    args = parse_args(argv)
    why = cuda_missing()
    if why is not None:
        log(f"benchmarks.gpu: cannot run: {why}. It measures feeding a GPU; run python -m benchmarks.compare for the CPU.")
        return 2
    import torch

    log(f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}, {os.cpu_count()} CPUs; "
        f"{args.reps} reps of {args.seconds} s")
    steps = {ms: GpuStep.lasting(ms) for ms in args.step_ms}
    runs: list[Run] = []
    for workload in args.workloads:
        dataset = WORKLOADS[workload].make(args.quick)
        for step_ms, workers in itertools.product(args.step_ms, args.workers):
            for rep, label in rotations(args.reps, RUNS):
                run = measure(label, workload, dataset, workers, steps[step_ms], step_ms, rep,
                              args.seconds, args.seed)
                runs.append(run)
                log(f"  {workload} step={step_ms:g}ms workers={workers} rep={rep} {label}: "
                    f"{run.rate:,.0f} samples/s")
    rows = summarize(runs)
    log(format_table(rows))
    if args.json:
        write_runs(args.json, runs, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
