"""The whole measurement: checks, calibration, then repetitions of interleaved groups of runs.

For each repetition, workload and num_workers, one *group* runs every loader of the workload
back to back, in an order that rotates from one repetition to the next. Before a group the
machine is given time to go quiet; a group that other processes disturbed is measured again
while patience lasts.
"""

from __future__ import annotations

import functools
import time
from typing import Callable

import numpy as np

from dataloader import Dataset, SequentialSampler

from .batches import leaves, plain_batches
from .config import BenchConfig
from .loaders import MatmulStep, monitoring, one_blas_thread, our_loader, run_spec
from .machine import torch_version
from .measure import (
    Measurement, TreeMemorySampler, measure, measure_ideal, memcpy_bandwidth, wait_for_quiet,
)
from .repetitions import rotated
from .workloads import (
    IDEAL, LOAD_ONLY, MONITOR, OURS, PRELOAD, STEP_ONLY, THREAD, WORKLOADS, Workload,
)

_MIB = 2**20
Log = Callable[[str], None]


def loaders_for(config: BenchConfig, name: str, workers: int) -> list[str]:
    """The runs of one (workload, num_workers) group, in their first repetition's order."""
    with_torch = config.use_torch and torch_version() is not None
    return WORKLOADS[name].loaders(workers, with_torch)


def measure_all(config: BenchConfig, log: Log = lambda line: None) -> dict:
    """Every kept run of every repetition, the discarded ones, memcpy bandwidths, checks and
    the preload step's calibration."""
    datasets = {name: WORKLOADS[name].make(config.small) for name in config.workloads}
    checks = verify(datasets, config)
    runs: list[Measurement] = []
    discarded: list[Measurement] = []
    memcpy: list[float] = []
    deadline = time.perf_counter() + config.patience  # for waiting and re-measuring
    with TreeMemorySampler() as sampler:
        steps = calibrate(datasets, config, sampler, log)
        for rep in range(config.reps):
            memcpy.append(memcpy_bandwidth((64 if config.small else 256) * _MIB))
            for name in config.workloads:
                for workers in config.workers_for(name):
                    measure_group = functools.partial(
                        _measure_group, name, datasets[name], workers, rep, config, sampler, log,
                        steps[workers][0] if name == "preload" else None,
                    )
                    runs += _quiet_group(measure_group, config, deadline, discarded, log)
    calibration = {str(n): {"matmuls": s.count, **info} for n, (s, info) in steps.items()}
    return {"runs": runs, "discarded": discarded, "memcpy": memcpy, "checks": checks,
            "calibration": calibration}


def calibrate(datasets: dict[str, Dataset], config: BenchConfig, sampler: TreeMemorySampler,
              log: Log) -> dict[int, tuple[MatmulStep, dict]]:
    """For the preload workload, per num_workers: a matmul step as long as loading a batch.

    Loading is timed as the load-only run is; the step is sized from a microbenchmark, then
    rescaled once from a step-only run timed the same way.
    """
    if "preload" not in datasets:
        return {}
    found = {}
    dataset, batch_size = datasets["preload"], WORKLOADS["preload"].batch_size
    per_batch = lambda spec, workers: batch_size / measure(
        spec, config.seconds, _warmup(config, workers), sampler)["rate"]
    for workers in config.workers_for("preload"):
        wait_for_quiet(config.quiet_wait if config.patience else 0.0)
        load = per_batch(run_spec(LOAD_ONLY, dataset, batch_size, workers, config), workers)
        with one_blas_thread() as one_thread:
            step = MatmulStep.lasting(load)
        spec = run_spec(STEP_ONLY, dataset, batch_size, workers, config, step)
        step = step.refit(load, per_batch(spec, workers))
        found[workers] = step, {"load_ms": load * 1e3, "one_blas_thread": one_thread}
        log(f"preload, workers={workers}: loading a batch takes {load * 1e3:.1f} ms; "
            f"the step is {step.count} matmuls of {MatmulStep.SIDE}x{MatmulStep.SIDE}")
    return found


def verify(datasets: dict[str, Dataset], config: BenchConfig, batches: int = 3) -> dict[str, str]:
    """Our first batches (sequential order) against the plain loop's, per workload, for every
    setting of our loader the workload runs (worker type, preload, monitoring)."""
    found = {}
    for name, dataset in datasets.items():
        workload = WORKLOADS[name]
        size = workload.batch_size
        expected = list(plain_batches(dataset, list(range(batches * size)), size))
        labels = [label for label in workload.loaders(2, False)
                  if label in (OURS, THREAD, PRELOAD, MONITOR)]
        problems = []
        for label in labels:
            for count in config.workers_for(name):
                got = _first_batches(dataset, size, count, config, label, batches)
                where = f"{label}, num_workers={count}"
                problems += [f"{where}: {p}" for p in _differences(got, expected, workload)]
        found[name] = "; ".join(problems[:3]) or "ok"
    return found


def _first_batches(dataset: Dataset, size: int, workers: int, config: BenchConfig, label: str,
                   batches: int) -> list:
    sampler = SequentialSampler(dataset, batch_size=size)
    with monitoring(label == MONITOR):
        with iter(our_loader(dataset, sampler, workers, config, label)) as iterator:
            return [[np.array(leaf) for leaf in leaves(next(iterator))] for _ in range(batches)]


def _differences(got: list, expected: list, workload: Workload) -> list[str]:
    problems = []
    for k, (mine, theirs) in enumerate(zip(got, expected)):
        for i, (a, b) in enumerate(zip(mine, map(np.array, leaves(theirs)))):
            if a.shape != b.shape or a.dtype.kind != b.dtype.kind:
                problems.append(f"batch {k} field {i}: {a.dtype}{a.shape} != {b.dtype}{b.shape}")
            elif (workload.deterministic or i > 0) and not np.array_equal(a, b):
                problems.append(f"batch {k} field {i}: values differ")
    return problems


def _measure_group(name: str, dataset: Dataset, workers: int, rep: int, config: BenchConfig,
                   sampler: TreeMemorySampler, log: Log, step: MatmulStep | None
                   ) -> list[Measurement]:
    """One run of each loader, in this repetition's rotation of the order."""
    loaders = rotated(loaders_for(config, name, workers), rep)
    return [_measure_one(loader, name, dataset, workers, rep, config, sampler, log, step)
            for loader in loaders]


def _quiet_group(measure_group: Callable[[], list[Measurement]], config: BenchConfig,
                 deadline: float, discarded: list[Measurement], log: Log) -> list:
    """Measure one group, again while other processes disturb it and patience lasts."""
    while True:
        wait_for_quiet(min(config.quiet_wait, deadline - time.perf_counter()))
        started = time.perf_counter()
        group = measure_group()
        noisy = max(r.others_cpus for r in group) > config.noisy_cpus
        took = time.perf_counter() - started
        if not noisy or took > deadline - time.perf_counter():
            break
        log("  (disturbed by other processes: measuring this group again)")
        discarded += group
    for run in group:
        run.disturbed = noisy
    return group


def _warmup(config: BenchConfig, workers: int) -> int:
    # Enough warm-up batches to drain what the prefetch queue built up during start-up.
    return 2 * config.torch_prefetch_factor * max(1, workers) + 1


def _measure_one(
    loader: str, name: str, dataset: Dataset, workers: int, rep: int, config: BenchConfig,
    sampler: TreeMemorySampler, log: Log, step: MatmulStep | None = None,
) -> Measurement:
    warmup = _warmup(config, workers)
    batch_size = WORKLOADS[name].batch_size
    if loader == IDEAL:
        found = measure_ideal(dataset, batch_size, workers, config.seconds, warmup, config, sampler)
    else:
        spec = run_spec(loader, dataset, batch_size, workers, config, step)
        found = measure(spec, config.seconds, warmup, sampler)
    log(f"rep {rep + 1}/{config.reps} {name:7s} {loader:12s} workers={workers}: "
        f"{found['rate']:,.0f} samples/s, first batch {found['first_batch_s'] * 1e3:.0f} ms, "
        f"others used {found['others_cpus']:.2f} CPUs")
    return Measurement(name, loader, workers, rep, **found)
