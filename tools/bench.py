"""Benchmark this loader against ``torch.utils.data.DataLoader`` and against no loader at all.

Three workloads, each for every ``num_workers`` asked for (default 0 and 2):

- ``tiny``: per-sample overhead. 200k samples of (float32[8], int), batches of 256.
- ``images``: bandwidth. 3x224x224 uint8 images taken from a preallocated pool, batches of 64;
  making a sample costs nothing, so moving the batch from worker to consumer dominates.
- ``decode``: CPU work. 256 JPEGs encoded with Pillow at start-up and kept as bytes; each sample
  decodes one and crops it at random to 3x160x160 uint8, batches of 32.

Per workload and worker count, each repetition runs our loader, PyTorch's, the "no-loader"
baseline (one plain loop in this process making the same batches: the same ``dataset[i]``
calls, then ``np.stack``) and, for ``num_workers=n >= 2``, the "ideal" (n forked processes each
running that plain loop on its share, nothing sent anywhere: the most n workers could give on
this machine). The order rotates every repetition, so a drift of the noisy machine hits all
alike; ratios are formed within a repetition and the table quotes their medians. The method and
a full run are in docs/performance.md.

Usage: ``python tools/bench.py [--quick] [--reps N] [--workloads tiny,images,decode]
[--workers 0,2] [--seconds S] [--no-torch] [--json out.json] [-v]``. From Python:
``run(BenchConfig(...))`` returns the table rows, ``report(config)`` everything, and
``main(argv)`` is the command line.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import io
import json
import math
import multiprocessing
import os
import platform
import random
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import psutil

from dataloader import DataLoader, Dataset, RandomSampler, SequentialSampler
from dataloader.memory import available_cpus, process_tree_memory

OURS, TORCH, BASELINE, IDEAL = "ours", "torch", "no-loader", "ideal"
_MIB = 2**20
_NAN = float("nan")


# -- configuration -------------------------------------------------------------------------


@dataclass(frozen=True)
class BenchConfig:
    """What one benchmark run measures."""

    workloads: tuple[str, ...] = ("tiny", "images", "decode")
    workers: tuple[int, ...] = (0, 2)
    # Five repetitions give a median that one noisy repetition cannot move.
    reps: int = 5
    # Each run lasts this long after its warm-up batches: ~100 decode batches, and 5 reps of
    # 21 runs stay under ~5 minutes.
    seconds: float = 1.5
    # PyTorch's default; both loaders get the same.
    prefetch_factor: int = 2
    use_torch: bool = True
    # Smaller datasets (fewer JPEGs to encode, a smaller memcpy buffer) for smoke runs.
    small: bool = False
    # The machine is shared. Before each (workload, num_workers) group of runs, wait up to
    # quiet_wait s for other processes to go quiet (< 0.3 CPUs busy); a group during which
    # they used more than noisy_cpus is measured again. Waiting and re-measuring together
    # get at most patience s; after that, disturbed groups are kept and counted as such.
    quiet_wait: float = 10.0
    noisy_cpus: float = 0.5
    patience: float = 150.0
    seed: int = 0

    def __post_init__(self) -> None:
        unknown = sorted(set(self.workloads) - set(WORKLOADS))
        if unknown or not self.workloads:
            raise ValueError(f"workloads must be among {sorted(WORKLOADS)}; got {self.workloads}.")
        if not self.workers or any(not isinstance(n, int) or n < 0 for n in self.workers):
            raise ValueError(f"workers must be non-negative integers; got {self.workers}.")
        if self.patience < 0 or self.quiet_wait < 0:
            raise ValueError(
                f"patience and quiet_wait must be >= 0; got {self.patience}, {self.quiet_wait}."
            )
        if self.reps < 1 or self.seconds <= 0 or self.prefetch_factor < 1:
            raise ValueError(
                f"reps and prefetch_factor must be >= 1 and seconds > 0; got {self.reps}, "
                f"{self.prefetch_factor}, {self.seconds}."
            )

    @classmethod
    def quick(cls, **overrides: Any) -> "BenchConfig":
        """A smoke run: one short repetition on small datasets (about 15 s)."""
        return cls(**{"reps": 1, "seconds": 0.25, "small": True, "patience": 0.0, **overrides})


# -- workloads -----------------------------------------------------------------------------


class TinyDataset(Dataset):
    """(float32[8], int label): almost no work per sample, so the loader's overhead shows."""

    def __init__(self, size: int = 200_000) -> None:
        rng = np.random.default_rng(0)
        self.vectors = rng.standard_normal((size, 8), dtype=np.float32)
        self.labels = rng.integers(0, 1000, size)

    def __getitem__(self, index: int) -> tuple:
        return self.vectors[index], int(self.labels[index])

    def __len__(self) -> int:
        return len(self.labels)


class ImageDataset(Dataset):
    """(uint8[3, 224, 224], int label): image ``i`` is pool entry ``i % len(pool)``.

    The pool (256 images, 37 MiB) is larger than the CPU's private caches, so a batch is
    copied from memory, as freshly decoded images would be.
    """

    def __init__(self, size: int = 256_000, pool: int = 256) -> None:
        rng = np.random.default_rng(1)
        self.pool = rng.integers(0, 256, (pool, 3, 224, 224), dtype=np.uint8)
        self.size = size

    def __getitem__(self, index: int) -> tuple:
        return self.pool[index % len(self.pool)], index % 1000

    def __len__(self) -> int:
        return self.size


class DecodeDataset(Dataset):
    """(uint8[3, crop, crop], int label): decode one in-memory JPEG, crop it at random."""

    def __init__(self, size: int = 32_000, count: int = 256, side: int = 256, crop: int = 160):
        self.blobs = _make_jpegs(count, side)
        self.size, self.crop = size, crop

    def __getitem__(self, index: int) -> tuple:
        from PIL import Image

        blob = self.blobs[index % len(self.blobs)]
        image = np.asarray(Image.open(io.BytesIO(blob)).convert("RGB"))
        top = random.randrange(image.shape[0] - self.crop + 1)
        left = random.randrange(image.shape[1] - self.crop + 1)
        patch = image[top : top + self.crop, left : left + self.crop]
        return np.ascontiguousarray(patch.transpose(2, 0, 1)), index % 1000

    def __len__(self) -> int:
        return self.size


def _make_jpegs(count: int, side: int) -> list[bytes]:
    """``count`` photo-like JPEGs (smooth colour fields plus noise, ~30 KB each), quality 90."""
    from PIL import Image

    rng = np.random.default_rng(2)
    y, x = np.mgrid[0:side, 0:side].astype(np.float32) / side
    blobs = []
    for i in range(count):
        fx, fy, phase = 3 + i % 7, 2 + i % 5, i / count * 6.28
        field = np.stack([np.sin(fx * x + phase), np.cos(fy * y), np.sin(fx * x + fy * y)], -1)
        noisy = field * 90 + 128 + rng.normal(0, 10, field.shape)
        buffer = io.BytesIO()
        Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8)).save(buffer, "JPEG", quality=90)
        blobs.append(buffer.getvalue())
    return blobs


@dataclass(frozen=True)
class Workload:
    name: str
    batch_size: int
    make: Callable[[bool], Dataset]  # small -> dataset
    what: str
    deterministic: bool  # whether batches can be compared value for value


WORKLOADS = {
    "tiny": Workload(
        "tiny", 256, lambda small: TinyDataset(50_000 if small else 200_000),
        "per-sample overhead: (float32[8], int) samples, batch 256", True,
    ),
    "images": Workload(
        "images", 64, lambda small: ImageDataset(16_000 if small else 256_000),
        "bandwidth: uint8[3,224,224] images from a 256-image pool, batch 64", True,
    ),
    "decode": Workload(
        "decode", 32, lambda small: DecodeDataset(4_000 if small else 32_000, 64 if small else 256),
        "CPU: JPEG decode (256x256) + random crop to uint8[3,160,160], batch 32", False,
    ),
}


# -- the ways of making batches ------------------------------------------------------------


def open_ours(dataset: Dataset, batch_size: int, workers: int, config: BenchConfig) -> Iterator:
    sampler = RandomSampler(dataset, batch_size=batch_size, seed=config.seed)
    # No loader seed, as MegEngine users write it: the sampler's seed fixes the order.
    loader = DataLoader(
        dataset, sampler, num_workers=workers, prefetch_factor=config.prefetch_factor
    )
    return iter(loader)


def open_torch(dataset: Dataset, batch_size: int, workers: int, config: BenchConfig) -> Iterator:
    import torch
    from torch.utils.data import DataLoader as TorchLoader

    loader = TorchLoader(
        dataset, batch_size=batch_size, shuffle=True,
        generator=torch.Generator().manual_seed(config.seed), num_workers=workers,
        prefetch_factor=config.prefetch_factor if workers else None, persistent_workers=False,
    )
    return iter(loader)


def open_baseline(dataset: Dataset, batch_size: int, workers: int, config: BenchConfig) -> Iterator:
    """The same batches from a plain loop: ``dataset[i]`` for each index, then ``np.stack``.

    It goes on into further epochs (they cost it nothing), so that a fast baseline is still
    timed for the full ``seconds`` even where a loader's epoch ends sooner.
    """
    order = np.random.default_rng(config.seed).permutation(len(dataset)).tolist()
    return plain_batches(dataset, order, batch_size, forever=True)


def plain_batches(
    dataset: Dataset, order: list[int], batch_size: int, forever: bool = False
) -> Iterator[tuple]:
    while order:
        for start in range(0, len(order), batch_size):
            yield stack([dataset[i] for i in order[start : start + batch_size]])
        if not forever:
            return


def stack(samples: list) -> tuple:
    """The baseline's collation: arrays stacked, numbers into a 1-d array."""
    return tuple(
        np.stack(column) if isinstance(column[0], np.ndarray) else np.array(column)
        for column in zip(*samples)
    )


OPENERS = {OURS: open_ours, TORCH: open_torch, BASELINE: open_baseline}


def leaves(batch: Any) -> list:
    if isinstance(batch, (tuple, list)):
        return [leaf for item in batch for leaf in leaves(item)]
    if isinstance(batch, dict):
        return [leaf for item in batch.values() for leaf in leaves(item)]
    return [batch]


def touch(batch: Any) -> float:
    """What the consumer does with every batch, whoever made it: sum 16 values of each array."""
    total = 0.0
    for leaf in leaves(batch):
        array = leaf.numpy() if hasattr(leaf, "numpy") else np.asarray(leaf)
        total += float(array.reshape(-1)[:16].sum())
    return total


# -- what a run costs: memory, CPU, time ---------------------------------------------------


class TreeMemorySampler:
    """Samples the PSS of this process and its descendants every ``interval`` seconds.

    One sample costs ~2 ms of this process's time, hence 0.1 s. ``paused()`` holds the
    sampler off while workers are forked, so no child is born while this thread is in psutil.
    """

    def __init__(self, interval: float = 0.1) -> None:
        self._interval = interval
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.peak_pss = self.peak_rss = 0
        self._thread = threading.Thread(target=self._loop, name="bench-memory", daemon=True)

    def __enter__(self) -> "TreeMemorySampler":
        self.sample()  # warm psutil up (lazy imports) before any fork
        self._thread.start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self._stop.set()
        self._thread.join()

    def sample(self) -> None:
        with self._lock:
            memory = process_tree_memory()
            pss = memory.pss if memory.pss is not None else memory.rss
            self.peak_pss, self.peak_rss = max(self.peak_pss, pss), max(self.peak_rss, memory.rss)

    def reset(self) -> None:
        with self._lock:
            self.peak_pss = self.peak_rss = 0

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        with self._lock:
            yield

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            self.sample()


class CpuClock:
    """Wall time, CPU time of this process tree (os.times) and of the machine (/proc/stat)."""

    def __init__(self) -> None:
        self._start = time.perf_counter(), self._ours(), self._machine()

    def stop(self) -> dict:
        """Since construction: wall s, our CPU s, and the CPUs' worth other processes used."""
        wall0, ours0, machine0 = self._start
        wall, ours = time.perf_counter() - wall0, self._ours() - ours0
        machine = self._machine() - machine0
        others = _NAN if math.isnan(machine) else max(0.0, machine - ours) / wall
        return {"wall_s": wall, "cpu_s": ours, "others_cpus": others}

    @staticmethod
    def _ours() -> float:
        """This process and its children, once reaped (workers are joined before we stop)."""
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system

    @staticmethod
    def _machine() -> float:
        """Busy CPU seconds of all CPUs since boot (steal counts as busy); NaN if unknown."""
        lines = _lines("/proc/stat")
        if not lines or not lines[0].startswith("cpu "):
            return _NAN
        ticks = [int(v) for v in lines[0].split()[1:9]]
        return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


@dataclass
class Measurement:
    workload: str
    loader: str
    num_workers: int
    rep: int
    rate: float  # samples per second, after the warm-up batches
    first_batch_s: float  # from creating the iterator to holding the first batch
    peak_pss: int
    peak_rss: int
    bytes_per_sample: float
    samples_total: int  # every sample made, warm-up included
    cpu_s: float  # CPU time of this process and its children over the whole run
    wall_s: float  # the whole run: start-up, warm-up, measured part and shutdown
    others_cpus: float  # CPUs' worth of time other processes on the machine used meanwhile
    leftover_processes: int  # child processes still alive 5 s after the iterator was closed
    disturbed: bool = False  # other processes used > noisy_cpus during some run of its group


def measure(
    opener: Callable[[], Iterator], seconds: float, warmup: int, sampler: TreeMemorySampler
) -> dict:
    """Run one iterator for ``warmup`` batches plus ``seconds``; what it took."""
    gc.collect()
    sampler.reset()
    with sampler.paused():
        clock = CpuClock()
        start = time.perf_counter()
        iterator = opener()
    batch = next(iterator)
    touch(batch)
    first = time.perf_counter() - start
    sampler.sample()
    size = len(leaves(batch)[0])
    bytes_per_sample = sum(np.asarray(leaf).nbytes for leaf in leaves(batch)) / size
    batches, total, samples, timer = 1, size, 0, None
    for batch in iterator:
        touch(batch)
        batches, total = batches + 1, total + len(leaves(batch)[0])
        now = time.perf_counter()
        if timer is None:
            timer = now if batches >= warmup else None
        else:
            samples += len(leaves(batch)[0])
            if now - timer >= seconds:
                break
    rate = samples / (time.perf_counter() - timer) if samples else _NAN
    sampler.sample()
    close = getattr(iterator, "close", None)
    if close is not None:
        close()
    del iterator, batch  # PyTorch's iterator stops (and joins) its workers when dropped
    leftover = _reap()
    return {
        "rate": rate, "first_batch_s": first, "peak_pss": sampler.peak_pss,
        "peak_rss": sampler.peak_rss, "bytes_per_sample": bytes_per_sample,
        "samples_total": total, "leftover_processes": leftover, **clock.stop(),
    }


def measure_ideal(dataset: Dataset, batch_size: int, count: int, seconds: float, warmup: int,
                  config: BenchConfig, sampler: TreeMemorySampler) -> dict:
    """``count`` forked processes each run the plain loop on their share of the indices."""
    context = multiprocessing.get_context("fork")
    order = np.random.default_rng(config.seed).permutation(len(dataset))
    gc.collect()
    sampler.reset()
    go, children, pipes = context.Event(), [], []
    with sampler.paused():
        clock = CpuClock()
        for part in range(count):
            receive, send = context.Pipe(duplex=False)
            args = (dataset, order[part::count].tolist(), batch_size, seconds, warmup, go, send)
            children.append(context.Process(target=_plain_loop, args=args, daemon=True))
            children[-1].start()
            send.close()
            pipes.append(receive)
    go.set()
    results = [pipe.recv() for pipe in pipes]  # (samples, seconds, samples in all, bytes/sample)
    sampler.sample()
    for child in children:
        child.join()
    return {
        "rate": sum(s / t for s, t, _, _ in results), "first_batch_s": _NAN,
        "peak_pss": sampler.peak_pss, "peak_rss": sampler.peak_rss,
        "bytes_per_sample": results[0][3], "samples_total": sum(r[2] for r in results),
        "leftover_processes": _reap(), **clock.stop(),
    }


def _plain_loop(dataset: Dataset, order: list[int], batch_size: int, seconds: float,
                warmup: int, go: Any, pipe: Any) -> None:
    go.wait()
    batches, total, samples, timer = 0, 0, 0, None
    for batch in plain_batches(dataset, order, batch_size, forever=True):
        touch(batch)
        batches, total = batches + 1, total + len(batch[0])
        now = time.perf_counter()
        if timer is None:
            timer = now if batches >= warmup else None
        else:
            samples += len(batch[0])
            if now - timer >= seconds:
                break
    per_sample = sum(leaf.nbytes for leaf in batch) / len(batch[0])
    pipe.send((samples, time.perf_counter() - timer, total, per_sample))


def _reap(grace: float = 5.0) -> int:
    """Wait for children to exit; how many are still alive after ``grace`` seconds."""
    children = psutil.Process().children(recursive=True)
    _, alive = psutil.wait_procs(children, timeout=grace)
    return len(alive)


def memcpy_bandwidth(nbytes: int) -> float:
    """Bytes per second np.copyto moves between two ``nbytes`` buffers (best of 5, warm)."""
    source = np.ones(nbytes, np.uint8)
    target = np.empty_like(source)
    np.copyto(target, source)
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        np.copyto(target, source)
        best = min(best, time.perf_counter() - start)
    return nbytes / best


def wait_for_quiet(limit: float, threshold: float = 0.3, window: float = 0.3) -> float:
    """Wait until other processes use < ``threshold`` CPUs over ``window`` s, at most ``limit``
    s; the seconds waited."""
    start = time.perf_counter()
    while time.perf_counter() - start < limit:
        clock = CpuClock()
        time.sleep(window)
        if not clock.stop()["others_cpus"] >= threshold:  # NaN (unknown) counts as quiet
            break
    return time.perf_counter() - start


def verify(
    datasets: dict[str, Dataset], workers: Sequence[int], batches: int = 3
) -> dict[str, str]:
    """Our first batches (sequential order) against the plain loop's, per workload."""
    found = {}
    for name, dataset in datasets.items():
        workload = WORKLOADS[name]
        size = workload.batch_size
        expected = list(plain_batches(dataset, list(range(batches * size)), size))
        problems = []
        for count in workers:
            sampler = SequentialSampler(dataset, batch_size=size)
            with iter(DataLoader(dataset, sampler, num_workers=count)) as iterator:
                got = [tuple(np.array(leaf) for leaf in next(iterator)) for _ in range(batches)]
            problems += [f"num_workers={count}: {p}" for p in _differences(got, expected, workload)]
        found[name] = "; ".join(problems[:3]) or "ok"
    return found


def _differences(got: list, expected: list, workload: Workload) -> list[str]:
    problems = []
    for k, (mine, theirs) in enumerate(zip(got, expected)):
        for i, (a, b) in enumerate(zip(mine, theirs)):
            if a.shape != b.shape or a.dtype.kind != b.dtype.kind:
                problems.append(f"batch {k} field {i}: {a.dtype}{a.shape} != {b.dtype}{b.shape}")
            elif (workload.deterministic or i > 0) and not np.array_equal(a, b):
                problems.append(f"batch {k} field {i}: values differ")
    return problems


# -- the whole run -------------------------------------------------------------------------


def torch_version() -> str | None:
    try:
        import torch
    except ImportError:
        return None
    return torch.__version__


def loaders_for(config: BenchConfig, workers: int) -> list[str]:
    """The runs of one (workload, num_workers) group, in their first repetition's order."""
    with_torch = config.use_torch and torch_version() is not None
    return [OURS] + [TORCH] * with_torch + [BASELINE] + [IDEAL] * (workers >= 2)


def measure_all(config: BenchConfig, log: Callable[[str], None] = lambda line: None) -> dict:
    """Every kept run of every repetition, the discarded ones, memcpy bandwidths and checks."""
    datasets = {name: WORKLOADS[name].make(config.small) for name in config.workloads}
    checks = verify(datasets, config.workers)
    runs: list[Measurement] = []
    discarded: list[Measurement] = []
    memcpy: list[float] = []
    deadline = time.perf_counter() + config.patience  # for waiting and re-measuring
    with TreeMemorySampler() as sampler:
        for rep in range(config.reps):
            memcpy.append(memcpy_bandwidth((64 if config.small else 256) * _MIB))
            for name in config.workloads:
                for workers in config.workers:
                    measure_group = functools.partial(
                        _measure_group, name, datasets[name], workers, rep, config, sampler, log
                    )
                    runs += _quiet_group(measure_group, config, deadline, discarded, log)
    return {"runs": runs, "discarded": discarded, "memcpy": memcpy, "checks": checks}


def _measure_group(name: str, dataset: Dataset, workers: int, rep: int, config: BenchConfig,
                   sampler: TreeMemorySampler, log: Callable[[str], None]) -> list[Measurement]:
    """One run of each loader, in this repetition's rotation of the order."""
    loaders = _rotated(loaders_for(config, workers), rep)
    return [_measure_one(loader, name, dataset, workers, rep, config, sampler, log)
            for loader in loaders]


def _quiet_group(measure_group: Callable[[], list[Measurement]], config: BenchConfig,
                 deadline: float, discarded: list[Measurement], log: Callable[[str], None]) -> list:
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


def _rotated(items: list, shift: int) -> list:
    shift %= len(items)
    return items[shift:] + items[:shift]


def _measure_one(
    loader: str, name: str, dataset: Dataset, workers: int, rep: int, config: BenchConfig,
    sampler: TreeMemorySampler, log: Callable[[str], None],
) -> Measurement:
    # Enough warm-up batches to drain what the prefetch queue built up during start-up.
    warmup = 2 * config.prefetch_factor * max(1, workers) + 1
    batch_size = WORKLOADS[name].batch_size
    if loader == IDEAL:
        found = measure_ideal(dataset, batch_size, workers, config.seconds, warmup, config, sampler)
    else:
        opener = lambda: OPENERS[loader](dataset, batch_size, workers, config)
        found = measure(opener, config.seconds, warmup, sampler)
    log(f"rep {rep + 1}/{config.reps} {name:7s} {loader:9s} workers={workers}: "
        f"{found['rate']:,.0f} samples/s, first batch {found['first_batch_s'] * 1e3:.0f} ms, "
        f"others used {found['others_cpus']:.2f} CPUs")
    return Measurement(name, loader, workers, rep, **found)


def summarize(runs: list[Measurement], memcpy: list[float]) -> list[dict]:
    """One row per (workload, loader, num_workers); the baseline's num_workers is None."""
    rows = []
    for name in dict.fromkeys(r.workload for r in runs):
        mine = [r for r in runs if r.workload == name]
        base = {(r.rep, r.num_workers): r for r in mine if r.loader == BASELINE}
        for loader in (OURS, TORCH, IDEAL):
            for count in dict.fromkeys(r.num_workers for r in mine):
                group = [r for r in mine if (r.loader, r.num_workers) == (loader, count)]
                torch_runs = {r.rep: r for r in mine if (r.loader, r.num_workers) == (TORCH, count)}
                if group:
                    rows.append(_row(name, loader, count, group, base, torch_runs, memcpy))
        rows.append(_row(name, BASELINE, None, list(base.values()), base, {}, memcpy))
    return rows


def _row(name: str, loader: str, count: int | None, group: list[Measurement], base: dict,
         torch_runs: dict, memcpy: list[float]) -> dict:
    total, quiet = len(group), sum(not r.disturbed for r in group)
    # Runs other processes disturbed say more about them than about the loader: medians
    # are taken over the undisturbed repetitions wherever there is one.
    group = [r for r in group if not r.disturbed] or group

    def paired(ratio: Callable[[Measurement, Measurement], float], others: dict, key) -> list:
        return [ratio(r, others[key(r)]) for r in group if key(r) in others]

    by_group = lambda r: (r.rep, r.num_workers)
    vs_base = [v for v in paired(lambda r, b: r.rate / b.rate, base, by_group) if v == v]
    row = {
        "workload": name, "loader": loader, "num_workers": count,
        "reps": total, "quiet_reps": quiet,
        "samples_per_s": _median([r.rate for r in group]),
        "vs_no_loader": _median(vs_base), "vs_no_loader_min": min(vs_base, default=None),
        "vs_no_loader_max": max(vs_base, default=None),
        "first_batch_ms": _median([r.first_batch_s * 1e3 for r in group]),
        "peak_pss_mib": _median([r.peak_pss / _MIB for r in group]),
        "peak_rss_mib": _median([r.peak_rss / _MIB for r in group]),
        "cpu_us_per_sample": _median([r.cpu_s / r.samples_total * 1e6 for r in group]),
        "others_cpus": _median([r.others_cpus for r in group]),
        "leftover_processes": max((r.leftover_processes for r in group), default=0),
        "vs_torch": None, "first_batch_vs_torch": None, "pss_vs_torch": None,
    }
    if loader == OURS and torch_runs:
        by_rep = lambda r: r.rep
        row["vs_torch"] = _median(paired(lambda r, t: r.rate / t.rate, torch_runs, by_rep))
        row["first_batch_vs_torch"] = _median(
            paired(lambda r, t: r.first_batch_s / t.first_batch_s, torch_runs, by_rep))
        row["pss_vs_torch"] = _median(
            paired(lambda r, t: r.peak_pss / t.peak_pss, torch_runs, by_rep))
    if name == "images":
        row["bytes_per_s"] = _median([r.rate * r.bytes_per_sample for r in group])
        row["vs_memcpy"] = _median([r.rate * r.bytes_per_sample / memcpy[r.rep] for r in group])
    return row


def _median(values: Sequence[float]) -> float | None:
    values = [v for v in values if v == v]  # drop NaN
    return statistics.median(values) if values else None


# -- targets, table, machine ---------------------------------------------------------------

# (workload, column, comparison, threshold, what the issue asked for), all at 2 workers.
TARGETS = [
    ("images", "vs_no_loader", ">=", 1.6, "images >= 1.6x the no-loader rate"),
    ("images", "vs_torch", ">=", 3.0, "images about 3x PyTorch"),
    ("tiny", "vs_no_loader", ">=", 0.4, "tiny >= 0.4x the no-loader rate"),
    ("tiny", "vs_torch", ">=", 8.0, "tiny about 8x PyTorch"),
    ("decode", "vs_no_loader", ">=", 1.8, "decode >= 1.8x the no-loader rate"),
    *[(w, "first_batch_vs_torch", "<=", 1.0, f"{w}: first batch no later than PyTorch's")
      for w in ("tiny", "images", "decode")],
    *[(w, "pss_vs_torch", "<=", 1.0, f"{w}: peak PSS of the process tree <= PyTorch's")
      for w in ("tiny", "images", "decode")],
]


def targets(rows: list[dict], workers: int = 2) -> list[dict]:
    """The issue's targets this run can judge: value, whether met, and this machine's ceiling."""
    def find(workload: str, loader: str) -> dict | None:
        key = (workload, loader, workers)
        found = (r for r in rows if (r["workload"], r["loader"], r["num_workers"]) == key)
        return next(found, None)

    found = []
    for workload, column, op, threshold, text in TARGETS:
        row, ideal = find(workload, OURS), find(workload, IDEAL)
        value = None if row is None else row.get(column)
        if value is None:
            continue
        met = value >= threshold if op == ">=" else value <= threshold
        ceiling = ideal["vs_no_loader"] if ideal is not None and column == "vs_no_loader" else None
        found.append({"target": text, "column": column, "value": value, "threshold": threshold,
                      "op": op, "met": met, "ideal": ceiling})
    return found


_COLUMNS = [
    ("workload", "workload", "{}"), ("loader", "loader", "{}"), ("workers", "num_workers", "{}"),
    ("quiet", "quiet_reps", "{}"), ("samples/s", "samples_per_s", "{:,.0f}"),
    ("x no-loader", "vs_no_loader", "{:.2f}"),
    ("(min-max)", None, None), ("ours/torch", "vs_torch", "{:.2f}"),
    ("1st batch ms", "first_batch_ms", "{:.0f}"), ("peak PSS MiB", "peak_pss_mib", "{:.0f}"),
    ("CPU us/sample", "cpu_us_per_sample", "{:.2f}"), ("others' CPUs", "others_cpus", "{:.2f}"),
    ("GB/s", "bytes_per_s", "{:.2f}"), ("x memcpy", "vs_memcpy", "{:.2f}"),
]


def _cell(row: dict, key: str | None, fmt: str | None) -> str:
    if key == "quiet_reps":
        return f"{row['quiet_reps']}/{row['reps']}"
    if key is None:
        low, high = row.get("vs_no_loader_min"), row.get("vs_no_loader_max")
        return "" if low is None or row["loader"] == BASELINE else f"{low:.2f}-{high:.2f}"
    value = row.get(key)
    if value is None:
        return "-"
    return fmt.format(value / 1e9 if key == "bytes_per_s" else value)


def format_table(rows: list[dict]) -> str:
    """The rows as an aligned plain-text table."""
    cells = [[title for title, _, _ in _COLUMNS]]
    cells += [[_cell(row, key, fmt) for _, key, fmt in _COLUMNS] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(_COLUMNS))]
    lines = [
        "  ".join(c.ljust(w) if i < 3 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths)))
        for line in cells
    ]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(line.rstrip() for line in lines)


def format_targets(found: list[dict]) -> str:
    lines = []
    for t in found:
        ceiling = f"; {t['ideal']:.2f} for 2 plain processes here" if t["ideal"] is not None else ""
        lines.append(f"  [{'met' if t['met'] else 'NOT met'}] {t['target']}: {t['value']:.2f} "
                     f"(needs {t['op']} {t['threshold']:g}{ceiling})")
    return "\n".join(lines)


def machine() -> dict:
    """What the numbers were measured on."""
    import PIL

    cpu = next((line.split(":", 1)[1].strip() for line in _lines("/proc/cpuinfo")
                if line.startswith("model name")), platform.processor())
    return {
        "cpu": cpu, "cpus": os.cpu_count(), "cpus_available": available_cpus(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "platform": platform.platform(), "python": platform.python_version(),
        "numpy": np.__version__, "torch": torch_version(), "pillow": PIL.__version__,
        "psutil": psutil.__version__, "start_method": multiprocessing.get_start_method(),
        "dataloader_commit": _git("rev-parse", "--short", "HEAD"),
        "dataloader_changed_files": len(
            (_git("status", "--porcelain", "dataloader") or "").splitlines()),
    }


def _git(*args: str) -> str | None:
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        done = subprocess.run(["git", *args], cwd=here, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _lines(path: str) -> list[str]:
    try:
        with open(path) as handle:
            return handle.readlines()
    except OSError:
        return []


# -- entry points --------------------------------------------------------------------------


def run(
    config: BenchConfig | None = None, log: Callable[[str], None] = lambda line: None
) -> list[dict]:
    """Measure and return the table rows (see :func:`summarize`)."""
    return report(config or BenchConfig(), log)["rows"]


def report(config: BenchConfig, log: Callable[[str], None] = lambda line: None) -> dict:
    """Everything a run produced: machine, config, checks, rows, targets and every run."""
    started = time.perf_counter()
    measured = measure_all(config, log)
    rows = summarize(measured["runs"], measured["memcpy"])
    return {
        "machine": machine(), "config": asdict(config), "torch": torch_version() is not None
        and config.use_torch, "checks": measured["checks"],
        "memcpy_bytes_per_s": _median(measured["memcpy"]), "memcpy_per_rep": measured["memcpy"],
        "rows": rows, "targets": targets(rows),
        "runs": [asdict(r) for r in measured["runs"]],
        "discarded_runs": [asdict(r) for r in measured["discarded"]],
        "wall_s": time.perf_counter() - started,
    }


def resummarize(path: str) -> dict:
    """An earlier report with its rows and targets computed afresh from its runs."""
    with open(path) as handle:
        result = json.load(handle)
    runs = [Measurement(**run) for run in result["runs"]]
    memcpy = [result["memcpy_bytes_per_s"]] * (1 + max(r.rep for r in runs))
    memcpy = result.get("memcpy_per_rep") or memcpy
    result["rows"] = summarize(runs, memcpy)
    result["targets"] = targets(result["rows"])
    return result


def format_report(result: dict) -> str:
    config, info = result["config"], result["machine"]
    lines = [
        f"machine: {info['cpu']}, {info['cpus_available']} of {info['cpus']} CPUs, "
        f"{info['memory_gib']} GiB; Python {info['python']}, numpy {info['numpy']}, "
        f"torch {info['torch'] or '(absent)'}; "
        f"memcpy {result['memcpy_bytes_per_s'] / 1e9:.1f} GB/s",
        f"{config['reps']} rep(s), {config['seconds']:g} s per run; medians (of the quiet reps "
        f"where there are any), ratios paired within a rep; {result['wall_s']:.0f} s in all; "
        f"{len(result['discarded_runs'])} runs disturbed by other processes were measured again",
    ]
    if not result["torch"]:
        lines.append(
            "PyTorch not measured (not importable, or --no-torch): ours and the baselines only."
        )
    lines.append("checks (our batches == the plain loop's): "
                 + ", ".join(f"{k} {v}" for k, v in result["checks"].items()))
    lines += ["", format_table(result["rows"])]
    if result["targets"]:
        lines += ["", "targets (2 workers):", format_targets(result["targets"])]
    for row in result["rows"]:
        if row["leftover_processes"]:
            lines.append(f"warning: {row['loader']} left {row['leftover_processes']} process(es) "
                         f"running after closing its {row['workload']} iterator")
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> tuple[BenchConfig, argparse.Namespace]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one short rep on small datasets")
    parser.add_argument("--reps", type=int, help="repetitions (default 5, --quick 1)")
    parser.add_argument("--seconds", type=float, help="measured seconds per run (default 1.5)")
    parser.add_argument("--workloads", default="tiny,images,decode")
    parser.add_argument("--workers", default="0,2", help="num_workers values, comma-separated")
    parser.add_argument("--no-torch", action="store_true", help="leave PyTorch's loader out")
    parser.add_argument(
        "--patience", type=float, help="seconds to spend in all waiting for a quiet machine "
        "and re-measuring disturbed groups (default 150, --quick 0)")
    parser.add_argument("--json", metavar="PATH", help="also write everything as JSON here")
    parser.add_argument("--verbose", "-v", action="store_true", help="log every run to stderr")
    parser.add_argument(
        "--from-json", metavar="PATH", help="measure nothing: re-summarize the runs of an "
        "earlier --json file and print its table")
    args = parser.parse_args(argv)
    overrides: dict[str, Any] = {
        "workloads": tuple(w.strip() for w in args.workloads.split(",") if w.strip()),
        "workers": tuple(int(n) for n in args.workers.split(",") if n.strip()),
        "use_torch": not args.no_torch,
    }
    if args.reps is not None:
        overrides["reps"] = args.reps
    if args.seconds is not None:
        overrides["seconds"] = args.seconds
    if args.patience is not None:
        overrides["patience"] = args.patience
    return (BenchConfig.quick(**overrides) if args.quick else BenchConfig(**overrides)), args


def main(argv: Sequence[str] | None = None) -> int:
    try:
        config, args = parse_args(argv)
    except ValueError as error:
        print(f"bench: {error}", file=sys.stderr)
        return 2
    quiet = lambda line: None
    log = (lambda line: print(line, file=sys.stderr, flush=True)) if args.verbose else quiet
    result = resummarize(args.from_json) if args.from_json else report(config, log)
    print(format_report(result))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(result, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
