"""Benchmarks against peers: this loader against PyTorch's DataLoader, no loader at all, the
floor of a process transport, a GPU's feed, and torchvision's transforms.

Not imported by ``import dataloader``; torch, Pillow, OpenCV and matplotlib are imported only
where a workload or an option needs them. The command lines are ``python -m dataloader
bench`` (the main bench), ``python -m dataloader.bench.{floor,gpu,vision,columnar,raydata,autotune}`` (the
others) and, in a checkout, their launchers ``python tools/bench*.py``. The files:

- ``cli.py``: the main bench's entry: ``main(argv)``, ``run(config)``, ``report(config)``.
- ``config.py``: ``BenchConfig``, what one run of the main bench measures, validated.
- ``workloads.py``: the datasets, batch sizes and runs of each workload.
- ``small.py``: the small-sample workloads' datasets (``scalars``, ``record``, ``vector``).
- ``batches.py``: a batch's arrays, the consumer's ``touch``, the plain loop's batches.
- ``loaders.py``: the ways of making batches (ours, PyTorch's, the plain loop) and the step.
- ``measure.py``: one run: rate, first batch, memory, CPU time, other processes' CPU use.
- ``schedule.py``: all runs: checks, calibration, rotating groups, re-measuring noisy ones.
- ``summary.py``: rows (medians, paired ratios, derived numbers) and the issue's targets.
- ``tables.py``: the printed report; ``machine.py``: what the numbers were measured on.
- ``plot.py``: ``--plot``: throughput and our loader's stage times in one PNG.
- ``repetitions.py``: rotating order of runs, medians of ratios paired within a repetition.
- ``output.py``: table cells, aligned tables and JSON files, for every tool.
- ``options.py``: the command-line options the tools share (their types: :mod:`dataloader.argtypes`).
- ``floor.py``, ``floor_workers.py``: the floor of a process transport (``bench_floor``).
- ``gpu.py``: feeding a GPU: device copy and preload against pinned memory (``bench_gpu``).
- ``vision.py``, ``vision_ops.py``: each vision transform against its peer (``bench_vision``).
- ``columnar.py``, ``columnar_contenders.py``, ``columnar_data.py``: Parquet and Arrow reading
  against the plain reader, PyTorch, Hugging Face datasets and ImageFolder (``bench_columnar``).
- ``raydata.py``: Ray Data's ``iter_batches`` against ``RayStream`` and this loader alone, and
  what ``RayStream`` adds per batch (``bench_ray``).
- ``autotune.py``, ``autotune_runs.py``, ``autotune_measure.py``, ``autotune_report.py``:
  ``num_workers="auto"`` against a sweep of fixed ``num_workers`` on five workloads, with its
  targets (``bench_autotune``); ``autotune_measure.py`` also times ``python -m dataloader tune``.
"""

from .cli import main, report, resummarize, run
from .config import BenchConfig
from .tables import format_report
from .workloads import WORKLOADS

__all__ = ["BenchConfig", "WORKLOADS", "format_report", "main", "report", "resummarize", "run"]
