"""See inside the pipeline: per-stage timings, a stats snapshot with a verdict, env switches.

Every epoch records, per batch, when fetch, transform and collate ran (in
whichever process or thread made it), how long it spent in transport, how
long the consumer waited in ``next()`` and how long preload took. Recording
is always on (a few floats per batch); ``loader.stats()`` summarises it.

Environment switches, read when an iterator starts:

- ``DATALOADER_MONITOR=1`` logs the stage table every
  ``DATALOADER_MONITOR_FREQUENCY`` batches (default 10) through the
  ``dataloader`` logger; MegEngine's ``MGE_DATA_MONITOR`` and
  ``MGE_DATA_MONITOR_FREQUENCY`` are honoured too.
- ``DATALOADER_TRACE=path.json`` writes a Chrome Trace Event file (opens in
  Perfetto) when the epoch ends or its iterator closes.
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass, field
from operator import sub
from time import perf_counter
from typing import Any

from ._trace import write_trace

logger = logging.getLogger("dataloader")

STAGES = ("fetch", "transform", "collate", "transport", "wait", "preload")
_DEFAULT_FREQUENCY = 10


@dataclass(frozen=True)
class MonitorSettings:
    """What the environment asked for when an iterator started."""

    log_every: int | None = None
    trace_path: str | None = None

    def make_visible(self) -> None:
        """With monitoring asked for, make sure its INFO reports reach the terminal.

        Python shows only warnings unless logging is configured; a user who set
        DATALOADER_MONITOR=1 wants to see the tables, so the ``dataloader``
        logger gets INFO level and, if no handler is configured anywhere, one
        to stderr.
        """
        if self.log_every is None or logger.isEnabledFor(logging.INFO):
            return
        logger.setLevel(logging.INFO)
        if not logger.hasHandlers():
            logger.addHandler(logging.StreamHandler())

    @classmethod
    def from_env(cls, environ: Any = None) -> "MonitorSettings":
        env = os.environ if environ is None else environ
        enabled = _truthy(env.get("DATALOADER_MONITOR", env.get("MGE_DATA_MONITOR", "")))
        raw = env.get("DATALOADER_MONITOR_FREQUENCY", env.get("MGE_DATA_MONITOR_FREQUENCY", ""))
        try:
            frequency = max(1, int(raw)) if raw else _DEFAULT_FREQUENCY
        except ValueError:
            logger.warning("DATALOADER_MONITOR_FREQUENCY=%r is not an integer; using %d", raw, _DEFAULT_FREQUENCY)
            frequency = _DEFAULT_FREQUENCY
        return cls(frequency if enabled else None, env.get("DATALOADER_TRACE") or None)


def _truthy(value: str) -> bool:
    return value.strip().lower() not in ("", "0", "false", "no", "off")


@dataclass(frozen=True)
class StageSummary:
    """Durations of one stage, in seconds."""

    count: int
    total: float
    mean: float
    p50: float
    p95: float


@dataclass(frozen=True)
class Stats:
    """A snapshot of one epoch so far. ``verdict`` names the bottleneck and the knob."""

    batches: int
    samples: int
    elapsed: float
    samples_per_second: float
    wait_fraction: float
    worker_utilization: float | None
    shared_memory_bytes: int
    num_workers: int
    stages: dict = field(default_factory=dict)
    verdict: str = ""

    def table(self) -> str:
        """The stage timings as an aligned text table, with the summary and the verdict."""
        lines = [f"{'stage':<10} {'count':>7} {'total s':>9} {'mean ms':>9} {'p50 ms':>9} {'p95 ms':>9}"]
        for name, s in self.stages.items():
            lines.append(
                f"{name:<10} {s.count:>7} {s.total:>9.3f} {s.mean * 1e3:>9.3f} {s.p50 * 1e3:>9.3f} {s.p95 * 1e3:>9.3f}"
            )
        utilization = "n/a" if self.worker_utilization is None else f"{self.worker_utilization:.0%}"
        lines.append(
            f"{self.batches} batches, {self.samples_per_second:,.0f} samples/s, consumer waited "
            f"{self.wait_fraction:.0%} of {self.elapsed:.2f} s, workers {utilization} busy, "
            f"shared memory {self.shared_memory_bytes / 2**20:.1f} MiB"
        )
        lines.append(f"verdict: {self.verdict}")
        return "\n".join(lines)


class Recorder:
    """Collects the timings of one epoch (thread-safe for one writer per kind of event)."""

    def __init__(self, num_workers: int, settings: MonitorSettings | None = None, worker_type: str = "process") -> None:
        self.num_workers = num_workers
        self.worker_type = worker_type
        self.settings = settings or MonitorSettings()
        self.started = perf_counter()
        # (worker, index, start, fetched, transformed, collated, received, samples, transport seconds)
        self.batches: list[tuple] = []
        self.waits: list[tuple[float, float]] = []
        self.preloads: list[tuple[float, float]] = []
        self.pids: dict[int, int] = {}
        self.shared_memory = lambda: 0
        self._written = False
        self._cores = os.cpu_count() or 1

    def batch_made(
        self, worker: int, index: int, times: Any, received: float | None = None, transport: float = 0.0
    ) -> None:
        """Batch ``index`` was made by ``worker`` (-1: this process) and reached the executor at ``received``."""
        if times is None:
            return
        received = times.collated if received is None else received
        self.batches.append(
            (worker, index, times.start, times.fetched, times.transformed, times.collated, received, times.samples, transport)
        )

    def preloaded(self, start: float, end: float) -> None:
        self.preloads.append((start, end))

    def waited(self, start: float, end: float) -> None:
        self.waits.append((start, end))
        every = self.settings.log_every
        if every and len(self.waits) % every == 0 and logger.isEnabledFor(logging.INFO):
            # The last `every` batches only: a summary of everything so far would
            # cost more with every report.
            logger.info(
                "DataLoader stages after %d batches (the last %d):\n%s",
                len(self.waits), every, self.snapshot(last=every).table(),
            )

    def finish(self) -> None:
        """End of the epoch (or close): write the trace if one was asked for."""
        if self.settings.trace_path and not self._written and self.batches:
            self._written = True
            write_trace(self, self.settings.trace_path)

    def snapshot(self, last: int | None = None) -> Stats:
        """The epoch so far, or only its ``last`` batches."""
        batches, waits_list, preloads_list = self.batches, self.waits, self.preloads
        started = self.started
        if last is not None:
            batches, waits_list, preloads_list = batches[-last:], waits_list[-last:], preloads_list[-last:]
            started = waits_list[0][0] if waits_list else started
        # Plain Python on purpose: a report covers a few batches, where NumPy's per-call
        # overhead costs more than the arithmetic (and a whole epoch is still a millisecond).
        _, _, start, fetched, transformed, collated, _, counts, transport = (
            zip(*batches) if batches else ((),) * 9
        )
        durations = {
            "fetch": list(map(sub, fetched, start)),
            "transform": list(map(sub, transformed, fetched)),
            "collate": list(map(sub, collated, transformed)),
            "transport": list(transport) if self.num_workers else [],
            "wait": [stop - go for go, stop in waits_list],
            "preload": [stop - go for go, stop in preloads_list],
        }
        stages = {name: _summary(values) for name, values in durations.items() if values}
        end = max(perf_counter() if not waits_list else waits_list[-1][1], started)
        elapsed = max(end - started, 1e-9)
        samples = int(sum(counts))
        busy = sum(map(sub, collated, start))
        # Measured from the first batch's start: worker start-up is not idleness.
        span = max(collated) - min(start) if batches else 0.0
        utilization = min(1.0, busy / (self.num_workers * span)) if self.num_workers and span > 0 else None
        wait_fraction = min(1.0, sum(durations["wait"]) / elapsed)
        stats = dict(
            batches=len(waits_list),
            samples=samples,
            elapsed=elapsed,
            samples_per_second=samples / elapsed,
            wait_fraction=wait_fraction,
            worker_utilization=utilization,
            shared_memory_bytes=int(self.shared_memory()),
            num_workers=self.num_workers,
            stages=stages,
        )
        return Stats(**stats, verdict=verdict(stats, self._cores))


def _summary(values: list[float]) -> StageSummary:
    ordered = sorted(values)  # nearest-rank percentiles
    count = len(ordered)
    total = sum(ordered)
    p50, p95 = ordered[(count - 1) // 2], ordered[min(count - 1, math.ceil(0.95 * count) - 1)]
    return StageSummary(count, total, total / count, p50, p95)


# Below this the consumer barely waits: the loader keeps up.
_WAIT_LOW = 0.1
# Above this workers have no idle time left to give.
_BUSY_HIGH = 0.8


def verdict(stats: dict, cores: int) -> str:
    """One line: what limits throughput and which knob to turn."""
    wait = stats["wait_fraction"]
    workers = stats["num_workers"]
    utilization = stats["worker_utilization"]
    stages = stats["stages"]
    waited = f"the consumer waited {wait:.0%} of the time"
    if wait < _WAIT_LOW:
        spare = f"; workers were {utilization:.0%} busy, so fewer may do" if utilization is not None and utilization < 0.5 else ""
        return f"consumer-bound: {waited}; the training step is the bottleneck, not loading{spare}"
    heaviest = _heaviest_stage(stages)
    if workers == 0:
        return (
            f"input-bound: {waited} while batches were made in this process ({heaviest} dominates) "
            f"-> set num_workers (up to {cores} cores available)"
        )
    transport = stages.get("transport")
    making = sum(stages[s].total for s in ("fetch", "transform", "collate") if s in stages)
    if utilization is None:
        return f"input-bound: {waited} -> raise num_workers or prefetch_factor"
    if transport is not None and transport.total > making and utilization < _BUSY_HIGH:
        return (
            f"transport-bound: {waited}, batches spent {transport.mean * 1e3:.1f} ms each in transport "
            f"against {making / max(1, transport.count) * 1e3:.1f} ms to make -> return NumPy arrays "
            "(not Python objects) from the collator, or use worker_type='thread'"
        )
    if utilization >= _BUSY_HIGH:
        if workers < cores:
            return (
                f"input-bound: {waited} and workers were {utilization:.0%} busy -> raise num_workers "
                f"({cores} cores available; {heaviest} dominates)"
            )
        return (
            f"input-bound: {waited}, workers were {utilization:.0%} busy on all {cores} cores -> make "
            f"{heaviest} cheaper (it dominates), or cache decoded data"
        )
    return (
        f"input-bound: {waited} but workers were only {utilization:.0%} busy -> raise prefetch_factor, "
        "or check for a slow main-process stage (a stream read or a batch transform)"
    )


def _heaviest_stage(stages: dict) -> str:
    making = {s: stages[s].total for s in ("fetch", "transform", "collate") if s in stages}
    return max(making, key=making.get) if making else "fetch"
