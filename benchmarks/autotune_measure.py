"""One timed run of our loader, as the autotune bench takes it.

A run builds ``DataLoader(**options)``, hands batches to a consumer for ``warmup_s`` seconds
(untimed: start-up, and the autotuner's first steps), then times ``seconds`` more. Meanwhile a
:class:`~benchmarks.measure.TreeMemorySampler` keeps the peak PSS and RSS of the process
tree. At the end it reads ``loader.stats()`` before the loader is closed: the worker count in
use, and the autotuner's decisions (``stats().tuning``; none for a fixed setting).

Where the data runs out before the time does, the run goes on with the next epoch (each epoch
starts its workers, and an autotuner, again); ``epochs`` says how many it took.
"""

from __future__ import annotations

import gc
import time
from dataclasses import asdict, dataclass, field, is_dataclass
from typing import Any, Callable, Iterator

import psutil

from dataloader import DataLoader

from .batches import leaves
from .measure import CpuClock, TreeMemorySampler

#: The fields of a ``stats().tuning`` record that the tools keep.
TUNING_FIELDS = ("batch", "seconds", "workers", "prefetch", "reason")


@dataclass
class Measured:
    """What one run gave."""

    rate: float  # samples/s over the timed part (NaN when it got no batch)
    samples: int  # samples handed out in all, warm-up included
    batches: int
    first_batch_s: float  # from iter(loader) to the first batch in hand
    peak_pss: int  # bytes, the process tree's peak (RSS where PSS cannot be read)
    peak_rss: int
    peak_memory: int | None  # PSS less shared-memory pages, plus shared memory gained
    num_workers: int | None  # stats().num_workers at the end: the count in use
    tuning: list[dict] = field(default_factory=list)  # stats().tuning of the last epoch
    epochs: int = 1
    cpu_s: float = 0.0  # CPU time of the process tree over the whole run
    wall_s: float = 0.0
    others_cpus: float = float("nan")  # CPUs' worth other processes used meanwhile
    leftover_processes: int = 0  # new child processes still alive 5 s after the run

    @property
    def settle(self) -> tuple[float, int]:
        """(seconds, batch) of the autotuner's last decision; (0, 0) where it made none."""
        if not self.tuning:
            return 0.0, 0
        last = self.tuning[-1]
        return float(last.get("seconds") or 0.0), int(last.get("batch") or 0)

    @property
    def reason(self) -> str | None:
        """The last decision's reason, or None."""
        return str(self.tuning[-1].get("reason")) if self.tuning else None

    @property
    def prefetch(self) -> Any:
        """The prefetch depth the last decision set, or None."""
        return self.tuning[-1].get("prefetch") if self.tuning else None


class _Epochs:
    """The loader's batches, epoch after epoch; remembers the latest epoch's stats."""

    def __init__(self, loader: DataLoader) -> None:
        self.loader = loader
        self.count = 0
        self.stats: Any = None
        self._batches: Iterator[Any] | None = None

    def open(self) -> None:
        """Start an epoch (``iter(loader)``: its workers start here)."""
        self._batches = iter(self.loader)
        self.count += 1

    def __iter__(self) -> Iterator[Any]:
        while True:
            if self._batches is None:
                self.open()
            assert self._batches is not None
            yielded = False
            for batch in self._batches:
                yielded = True
                yield batch
            self.stats = self._read_stats()
            self._close_epoch()
            if not yielded:  # an empty epoch: the data has no batch to give
                return

    def _read_stats(self) -> Any:
        try:
            return self.loader.stats()
        except RuntimeError:  # no epoch recorded
            return None

    def _close_epoch(self) -> None:
        batches, self._batches = self._batches, None
        close = getattr(batches, "close", None)
        if close is not None:
            close()

    def finish(self) -> None:
        """Read the open epoch's stats (before it stops: the worker count in use), then stop it
        and the loader's workers."""
        if self._batches is not None:
            self.stats = self._read_stats()
        try:
            self._close_epoch()
        finally:
            self.loader.close()


def batch_samples(batch: Any, default: int) -> int:
    """Samples in ``batch``: the length of its first array (or list of strings); ``default``
    where that has no length."""
    try:
        return len(leaves(batch)[0])
    except (TypeError, IndexError):
        return default


def tuning_records(stats: Any) -> list[dict]:
    """``stats.tuning`` as plain dicts (:data:`TUNING_FIELDS` and ``describe``); [] without."""
    records = []
    for record in getattr(stats, "tuning", None) or ():
        if is_dataclass(record) and not isinstance(record, type):
            plain = {k: v for k, v in asdict(record).items() if k in TUNING_FIELDS}
        else:
            plain = {name: getattr(record, name, None) for name in TUNING_FIELDS}
        describe = getattr(record, "describe", None)
        plain["describe"] = describe() if callable(describe) else str(record)
        records.append(plain)
    return records


def measure_loader(
    options: dict[str, Any], consume: Callable[[Any], Any], warmup_s: float, seconds: float,
    sampler: TreeMemorySampler, default_batch: int = 1, warmup_from_first: bool = False,
) -> Measured:
    """Run ``DataLoader(**options)`` for ``warmup_s`` untimed seconds (at least one batch), then
    ``seconds`` timed; ``consume`` gets every batch. The warm-up counts from ``iter(loader)``,
    or with ``warmup_from_first`` from the first batch (so that workers' start-up, seconds
    under forkserver, does not use it up). Errors (of the options, of the data) propagate,
    with the workers stopped."""
    gc.collect()
    before = {child.pid for child in psutil.Process().children(recursive=True)}
    sampler.reset()
    loader = DataLoader(**options)
    epochs = _Epochs(loader)
    with sampler.paused():  # fixed workers start in iter(loader), not while psutil runs
        clock = CpuClock()
        start = time.perf_counter()
        epochs.open()
    try:
        timed = _timed(epochs, consume, start, warmup_s, seconds, default_batch,
                       warmup_from_first)
        sampler.sample()
    finally:
        epochs.finish()
    leftover = _reap(before)
    stats = epochs.stats
    return Measured(
        **timed, peak_pss=sampler.peak_pss, peak_rss=sampler.peak_rss,
        peak_memory=sampler.peak_memory, num_workers=getattr(stats, "num_workers", None),
        tuning=tuning_records(stats), epochs=epochs.count, leftover_processes=leftover,
        **clock.stop(),
    )


def _timed(epochs: _Epochs, consume: Callable[[Any], Any], start: float, warmup_s: float,
           seconds: float, default_batch: int, from_first: bool = False) -> dict[str, Any]:
    """Batches until ``warmup_s`` after ``start`` (``from_first``: after the first batch) and
    then ``seconds`` more: the timed rate."""
    first, batches, samples, timed, timer = float("nan"), 0, 0, 0, None
    for batch in epochs:
        consume(batch)
        size = batch_samples(batch, default_batch)
        batches, samples = batches + 1, samples + size
        now = time.perf_counter()
        if batches == 1:
            first = now - start
            start = now if from_first else start
        if timer is None:
            if now - start >= warmup_s:
                timer = now
        else:
            timed += size
            if now - timer >= seconds:
                break
    elapsed = time.perf_counter() - timer if timer is not None else 0.0
    rate = timed / elapsed if timed and elapsed > 0 else float("nan")
    return {"rate": rate, "samples": samples, "batches": batches, "first_batch_s": first}


def _reap(before: set[int], grace: float = 5.0) -> int:
    """Wait for the child processes that were not there ``before``; how many outlive ``grace``."""
    children = [c for c in psutil.Process().children(recursive=True) if c.pid not in before]
    _, alive = psutil.wait_procs(children, timeout=grace)
    return len(alive)
