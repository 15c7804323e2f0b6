"""Measuring one run: time, first batch, peak PSS of the process tree, CPU time, and how
much other processes on the machine used meanwhile; waiting for a quiet machine."""

from __future__ import annotations

import contextlib
import gc
import math
import multiprocessing
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np
import psutil

from dataloader import Dataset
from dataloader.memory import PeakMemory, TreeMemory

from .batches import leaves, plain_batches, touch
from .loaders import RunSpec, close_iterator

if TYPE_CHECKING:
    from .config import BenchConfig

_NAN = float("nan")


class TreeMemorySampler(PeakMemory):
    """Samples the memory of this process and its descendants every ``interval`` seconds.

    Two measures. *PSS* (what the issue asks for) counts the pages the processes map, shared
    ones once. It misses shared memory that no process maps: a batch PyTorch's worker wrote
    and unmapped, which the main process has not read yet. *Memory* counts those too: the
    tree's PSS without its shared-memory pages, plus all the shared memory the machine
    gained since ``reset()`` (each page once, mapped or not; on a quiet machine, ours).
    The sampling thread, ``reset()`` and ``paused()`` are :class:`dataloader.memory.PeakMemory`'s.
    """

    def __init__(self, interval: float = 0.1) -> None:
        super().__init__(interval)
        self.peak_rss = 0
        self.peak_memory: int | None = None
        self._shmem_before = _machine_shmem()

    def _record(self, memory: TreeMemory) -> None:
        super()._record(memory)
        self.peak_rss = max(self.peak_rss, memory.rss)
        shmem = _machine_shmem()
        known = (memory.pss, memory.pss_shmem, shmem, self._shmem_before)
        if all(value is not None for value in known):
            full = memory.pss - memory.pss_shmem + max(0, shmem - self._shmem_before)
            self.peak_memory = max(self.peak_memory or 0, full)

    def _reset(self) -> None:
        super()._reset()
        self.peak_rss = 0
        self.peak_memory, self._shmem_before = None, _machine_shmem()


def _machine_shmem() -> int | None:
    """Bytes of shared memory the machine holds (``Shmem`` of /proc/meminfo), or None."""
    return getattr(psutil.virtual_memory(), "shared", None)


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
        lines = read_lines("/proc/stat")
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
    # Our loader's loader.stats() after the run: mean ms per batch of each stage it recorded.
    stages_ms: dict | None = None
    # CPU time of the process tree (live workers included) during the timed part, and the
    # samples delivered in it: CPU per sample without start-up and shutdown.
    timed_cpu_s: float | None = None
    timed_samples: int | None = None
    # Peak PSS less shared-memory pages plus all shared memory gained (see TreeMemorySampler).
    peak_memory: int | None = None


def measure(spec: RunSpec, seconds: float, warmup: int, sampler: TreeMemorySampler) -> dict:
    """Run one iterator for ``warmup`` batches plus ``seconds``; what it took."""
    gc.collect()
    sampler.reset()
    with spec.around():
        with sampler.paused():
            clock = CpuClock()
            start = time.perf_counter()
            iterator, stats = spec.open()
        batch = next(iterator)
        spec.consume(batch)
        first = time.perf_counter() - start
        sampler.sample()
        size = len(leaves(batch)[0])
        bytes_per_sample = sum(np.asarray(leaf).nbytes for leaf in leaves(batch)) / size
        timed = _timed(iterator, spec.consume, seconds, warmup, size)
        sampler.sample()
        close_iterator(iterator)
        del iterator, batch  # PyTorch's iterator stops (and joins) its workers when dropped
        leftover = _reap()
    return {
        "first_batch_s": first, "peak_pss": sampler.peak_pss, "peak_rss": sampler.peak_rss,
        "peak_memory": sampler.peak_memory, "bytes_per_sample": bytes_per_sample,
        "leftover_processes": leftover, **timed,
        **clock.stop(), "stages_ms": _stage_means(stats),
    }


def _timed(iterator: Iterator, consume: Any, seconds: float, warmup: int, made: int) -> dict:
    """Samples/s after ``warmup`` batches in all, for ``seconds``; samples made in all; the
    timed part's samples and CPU time."""
    batches, total, samples, timer, cpu = 1, made, 0, None, _NAN
    for batch in iterator:
        consume(batch)
        size = len(leaves(batch)[0])
        batches, total = batches + 1, total + size
        now = time.perf_counter()
        if timer is None:
            if batches >= warmup:
                cpu = tree_cpu_s()
                timer = time.perf_counter()
        else:
            samples += size
            if now - timer >= seconds:
                break
    rate = samples / (time.perf_counter() - timer) if samples else _NAN
    return {"rate": rate, "samples_total": total, "timed_samples": samples,
            "timed_cpu_s": tree_cpu_s() - cpu}


def tree_cpu_s() -> float:
    """CPU seconds used so far by this process, its reaped children (workers that ended with
    the epoch) and its live descendants."""
    me = psutil.Process()
    times = me.cpu_times()
    total = times.user + times.system + times.children_user + times.children_system
    for child in me.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            total += sum(child.cpu_times()[:2])
    return total


def _stage_means(stats: Any) -> dict | None:
    """``loader.stats()`` as {stage: mean ms per batch}; None for loaders other than ours."""
    if stats is None:
        return None
    try:
        found = stats()
    except RuntimeError:  # no epoch recorded
        return None
    return {name: summary.mean * 1e3 for name, summary in found.stages.items()}


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
            args = (dataset, order[part::count], batch_size, seconds, warmup, go, send)
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
        "peak_memory": sampler.peak_memory, "bytes_per_sample": results[0][3],
        "samples_total": sum(r[2] for r in results),
        "leftover_processes": _reap(), **clock.stop(),
    }


def _plain_loop(dataset: Dataset, order: np.ndarray, batch_size: int, seconds: float,
                warmup: int, go: Any, pipe: Any) -> None:
    go.wait()
    batches, total, samples, timer = 0, 0, 0, None
    for batch in plain_batches(dataset, order, batch_size, forever=True):
        touch(batch)
        size = len(leaves(batch)[0])
        batches, total = batches + 1, total + size
        now = time.perf_counter()
        if timer is None:
            timer = now if batches >= warmup else None
        else:
            samples += size
            if now - timer >= seconds:
                break
    per_sample = sum(np.asarray(leaf).nbytes for leaf in leaves(batch)) / size
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


def read_lines(path: str) -> list[str]:
    """The lines of ``path`` (/proc files), or none where it cannot be read."""
    try:
        with open(path) as handle:
            return handle.readlines()
    except OSError:
        return []
