"""The autotune bench's workloads and settings, and one run of a (workload, setting) pair.

Five workloads, their datasets taken from the main bench (``workloads.py``) and the columnar
bench (``columnar_data.py``, ``columnar_contenders.py``):

- ``tiny``: per-sample overhead, (float32[8], int) samples, batch 256.
- ``images``: bandwidth, uint8[3,224,224] images from a pool, batch 64.
- ``decode``: CPU, Pillow JPEG decode + random crop, batch 32.
- ``columnar``: JPEG bytes in Parquet (written as ``python -m dataloader convert`` writes them),
  a ``ParquetStream`` read in the main process (``parallel_stream=False``) and its rows handed
  to the workers to decode and crop, batch 32; one epoch of as many passes as the run needs
  (``epoch_size``). The columnar bench reads it with ``parallel_stream`` where it has workers.
- ``slow-consumer``: ``decode``, with a consumer that sleeps 25 ms per batch (a GPU step).

Settings: ``num_workers`` n with the default prefetch, and ``num_workers="auto"``.
"""

from __future__ import annotations

import importlib.util
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from dataloader import RandomSampler, StreamSampler
from dataloader.columnar import ParquetStream

from .autotune_measure import Measured, measure_loader
from .batches import touch
from .measure import TreeMemorySampler
from .workloads import DecodeDataset, ImageDataset, TinyDataset

AUTO = "auto"
SLOW_STEP_S = 0.025  # the slow consumer's sleep per batch
_EPOCH_BATCHES = 10**6  # the columnar stream's epoch: more batches than any run takes


@dataclass(frozen=True)
class AutoWorkload:
    """A workload: ``source(small, directory)`` is built once per bench (a dataset, or the
    path of files written there); ``options(source)`` gives one run's DataLoader arguments."""

    name: str
    what: str
    batch_size: int
    source: Callable[[bool, Path], Any]
    options: Callable[[Any, int], dict[str, Any]]
    step_s: float = 0.0  # the consumer's sleep per batch, after touching it
    needs: str | None = None  # a module it cannot run without

    def consume(self, batch: Any) -> None:
        touch(batch)
        if self.step_s:
            time.sleep(self.step_s)


def _map_options(dataset: Any, batch_size: int) -> dict[str, Any]:
    """A map dataset in random order, a new sampler per run."""
    return {"dataset": dataset, "sampler": RandomSampler(dataset, batch_size=batch_size, seed=0)}


def _decode(small: bool, _: Path) -> Any:
    return DecodeDataset(4_000 if small else 32_000, 64 if small else 256)


def _image_parquet(small: bool, directory: Path) -> Path:
    """JPEGs in Parquet, as the columnar bench writes them (with its other files, small)."""
    from .columnar_data import write_files

    (directory / "columnar").mkdir(exist_ok=True)
    return write_files(directory / "columnar", 1_024, 64 if small else 256).image_parquet


def _columnar_options(path: Path, batch_size: int) -> dict[str, Any]:
    from .columnar_data import DecodeCrop

    return {"dataset": ParquetStream(path), "sampler": StreamSampler(batch_size=batch_size),
            "transform": DecodeCrop(), "parallel_stream": False, "epoch_size": _EPOCH_BATCHES}


WORKLOADS = {
    "tiny": AutoWorkload(
        "tiny", "per-sample overhead: (float32[8], int), batch 256", 256,
        lambda small, _: TinyDataset(200_000 if small else 2_000_000), _map_options),
    "images": AutoWorkload(
        "images", "bandwidth: uint8[3,224,224] from a 256-image pool, batch 64", 64,
        lambda small, _: ImageDataset(16_000 if small else 256_000), _map_options),
    "decode": AutoWorkload(
        "decode", "CPU: Pillow JPEG decode + random crop to 160x160, batch 32", 32,
        _decode, _map_options),
    "columnar": AutoWorkload(
        "columnar", "ParquetStream of JPEG bytes read in the main process (parallel_stream="
        "False), decoded + cropped in workers, batch 32", 32,
        _image_parquet, _columnar_options, needs="cv2"),
    "slow-consumer": AutoWorkload(
        "slow-consumer", f"decode, the consumer sleeping {SLOW_STEP_S * 1e3:g} ms per batch "
        "(a GPU step), batch 32", 32, _decode, _map_options, step_s=SLOW_STEP_S),
}


def missing(workload: AutoWorkload) -> bool:
    """Whether a module the workload needs cannot be imported."""
    return workload.needs is not None and importlib.util.find_spec(workload.needs) is None


def settings(workers: list[int]) -> list[str]:
    """The settings of one workload: each fixed ``num_workers``, then auto."""
    return [str(n) for n in workers] + [AUTO]


def setting_options(setting: str) -> dict[str, Any]:
    """The loader arguments a setting adds: ``num_workers`` (a count, or "auto", which tunes
    the prefetch depth too)."""
    return {"num_workers": setting if setting == AUTO else int(setting)}


@dataclass
class Run:
    """One run of one (workload, setting) pair in repetition ``rep``; ``error`` where it raised."""

    workload: str
    setting: str  # "0", "1", ... or "auto"
    rep: int
    rate: float | None = None  # samples/s, timed part
    peak_pss_mib: float | None = None
    peak_rss_mib: float | None = None
    peak_memory_mib: float | None = None
    num_workers: int | None = None  # stats().num_workers at the end
    prefetch: Any = None  # the last tuning record's prefetch depth
    settle_s: float | None = None  # the last tuning record's seconds (0: none); auto only
    settle_batch: int | None = None
    reason: str | None = None
    tuning: list[dict] = field(default_factory=list)
    epochs: int = 0
    batches: int = 0
    first_batch_s: float | None = None
    others_cpus: float | None = None
    leftover_processes: int = 0
    error: str | None = None


def run_once(workload: AutoWorkload, source: Any, setting: str, rep: int, warmup_s: float,
             seconds: float, sampler: TreeMemorySampler) -> Run:
    """Measure one run; an exception becomes the run's ``error`` (the bench goes on)."""
    run = Run(workload.name, setting, rep)
    options = {**workload.options(source, workload.batch_size),
               **setting_options(setting)}
    try:
        got = measure_loader(options, workload.consume, warmup_s, seconds, sampler,
                             workload.batch_size)
    except Exception as error:  # reported in the tables and the JSON
        run.error = f"{type(error).__name__}: {error}".splitlines()[0]
        return run
    _fill(run, got)
    return run


def _fill(run: Run, got: Measured) -> None:
    mib = 2.0**20
    run.rate, run.num_workers, run.tuning = got.rate, got.num_workers, got.tuning
    run.peak_pss_mib, run.peak_rss_mib = got.peak_pss / mib, got.peak_rss / mib
    run.peak_memory_mib = None if got.peak_memory is None else got.peak_memory / mib
    run.prefetch, run.reason = got.prefetch, got.reason
    if run.setting == AUTO:
        run.settle_s, run.settle_batch = got.settle
    run.epochs, run.batches, run.first_batch_s = got.epochs, got.batches, got.first_batch_s
    run.others_cpus, run.leftover_processes = got.others_cpus, got.leftover_processes
