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

Workloads are the CPU bench's (tools/_bench_workloads.py): ``images`` (uint8[3,224,224],
batch 64: 9.6 MB a batch, bandwidth) and ``decode`` (Pillow JPEG decode + random crop,
batch 32: CPU). Needs PyTorch with CUDA and a GPU; without one it says so and exits 2.

Usage: ``python tools/bench_gpu.py [--workloads images,decode] [--workers 2,4,8]
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

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from dataloader import DataLoader, RandomSampler  # noqa: E402
from _bench_summary import dump_runs, median  # noqa: E402
from _bench_workloads import WORKLOADS  # noqa: E402

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
    import torch

    if label == STEP_ONLY:
        first = next(_open(OURS, dataset, batch_size, 0, seed))
        return itertools.repeat(first)
    if label == TORCH:
        from torch.utils.data import DataLoader as TorchLoader

        loader = TorchLoader(dataset, batch_size=batch_size, shuffle=True, pin_memory=True,
                             generator=torch.Generator().manual_seed(seed), num_workers=workers,
                             prefetch_factor=2 if workers else None)
        return (tuple(x.to(DEVICE, non_blocking=True) for x in batch) for batch in loader)
    loader = DataLoader(dataset, RandomSampler(dataset, batch_size=batch_size, seed=seed),
                        num_workers=workers, device=DEVICE, preload=label == PRELOAD)
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
        close = getattr(iterator, "close", None)
        if close is not None:
            close()
        del iterator
    return Run(workload, label, workers, step_ms, rep, count * batch_size / elapsed, first)


def summarize(runs: list[Run]) -> list[dict]:
    """One row per (workload, step, workers, run): median rate and paired ratios."""
    groups: dict[tuple, list[Run]] = {}
    for r in runs:
        groups.setdefault((r.workload, r.step_ms, r.num_workers, r.label), []).append(r)
    by_rep = {(r.workload, r.step_ms, r.num_workers, r.label, r.rep): r for r in runs}
    rows = []
    for (workload, step_ms, workers, label), group in groups.items():

        def paired(other: str) -> float | None:
            partners = [(r, by_rep.get((workload, step_ms, workers, other, r.rep))) for r in group]
            return median([r.rate / p.rate for r, p in partners if p is not None])

        rows.append({
            "workload": workload, "step_ms": step_ms, "num_workers": workers, "loader": label,
            "samples_per_s": median([r.rate for r in group]),
            "of_ceiling": paired(STEP_ONLY), "vs_torch": paired(TORCH),
            "first_batch_ms": median([r.first_batch_s * 1e3 for r in group]),
        })
    return rows


def format_table(rows: list[dict]) -> str:
    head = f"{'workload':<8} {'step ms':>7} {'workers':>7} {'loader':<13} {'samples/s':>10} {'of ceiling':>10} {'vs torch':>8} {'1st ms':>7}"
    lines = [head, "-" * len(head)]
    cell = lambda v, spec: format(v, spec) if v is not None else "-"
    for r in rows:
        lines.append(
            f"{r['workload']:<8} {r['step_ms']:>7g} {r['num_workers']:>7} {r['loader']:<13} "
            f"{cell(r['samples_per_s'], '>10.0f')} {cell(r['of_ceiling'], '>10.2f')} "
            f"{cell(r['vs_torch'] if r['loader'] != TORCH else None, '>8.2f')} {cell(r['first_batch_ms'], '>7.0f')}"
        )
    return "\n".join(lines)


def _comma_list(convert: Callable[[str], Any]) -> Callable[[str], list]:
    """An argparse type: "2,4,8" -> [convert("2"), convert("4"), convert("8")]."""
    return lambda text: [convert(v) for v in text.split(",") if v]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", default="images,decode")
    parser.add_argument("--workers", type=_comma_list(int), default=[2, 4, 8])
    parser.add_argument("--step-ms", type=_comma_list(float), default=[0.0, 4.0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="1 repetition of 0.3 s on small datasets")
    parser.add_argument("--json", help="write the runs and rows to this file")
    args = parser.parse_args(argv)
    args.workloads = [w for w in args.workloads.split(",") if w]
    unknown = [w for w in args.workloads if w not in ("images", "decode")]
    if unknown:
        parser.error(f"--workloads: {unknown} not among images, decode")
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
    args = parse_args(argv)
    why = cuda_missing()
    if why is not None:
        log(f"bench_gpu: cannot run: {why}. It measures feeding a GPU; run tools/bench.py for the CPU.")
        return 2
    import torch

    log(f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}, {os.cpu_count()} CPUs; "
        f"{args.reps} reps of {args.seconds} s")
    steps = {ms: GpuStep.lasting(ms) for ms in args.step_ms}
    runs: list[Run] = []
    for workload in args.workloads:
        dataset = WORKLOADS[workload].make(args.quick)
        for step_ms, workers in itertools.product(args.step_ms, args.workers):
            for rep in range(args.reps):
                order = RUNS[rep % len(RUNS):] + RUNS[: rep % len(RUNS)]
                for label in order:
                    run = measure(label, workload, dataset, workers, steps[step_ms], step_ms, rep,
                                  args.seconds, args.seed)
                    runs.append(run)
                    log(f"  {workload} step={step_ms:g}ms workers={workers} rep={rep} {label}: "
                        f"{run.rate:,.0f} samples/s")
    rows = summarize(runs)
    log(format_table(rows))
    if args.json:
        dump_runs(args.json, runs, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
