"""See inside the pipeline: per-stage timings, a stats snapshot with a verdict, env switches.

Every epoch records, per batch, how long reading a stream in this process
took (``read``, for ``parallel_stream=False``), when fetch, transform and
collate ran (in whichever process or thread made it), how long it spent in
transport, how long the consumer waited in ``next()`` and how long preload took. Recording
is always on (a few floats per batch); ``loader.stats()`` summarises it. The
latest :data:`KEEP` to ``2 * KEEP`` batches are kept one by one (percentiles,
the trace); older ones are folded into sums, so an epoch that never ends (an
``Infinite`` sampler) records in bounded memory.

Environment switches, read when an iterator starts:

- ``DATALOADER_MONITOR=1`` logs the stage table through the ``dataloader``
  logger every ``DATALOADER_MONITOR_INTERVAL`` seconds (default 10), or every
  ``DATALOADER_MONITOR_FREQUENCY`` batches when that is set instead (both set:
  every N batches, at most once per interval). MegEngine's ``MGE_DATA_MONITOR``
  and ``MGE_DATA_MONITOR_FREQUENCY`` are honoured too.
- ``DATALOADER_TRACE=path.json`` writes a Chrome Trace Event file (opens in
  Perfetto) when the epoch ends or its iterator closes. A path that cannot be
  written is reported (a warning) when the iterator starts, and the epoch runs
  without a trace.
"""

from __future__ import annotations

import logging
import math
import os
import threading
from dataclasses import dataclass, field
from operator import sub
from time import perf_counter
from typing import Any, Callable

from ._failure_book import FailureBook
from ._trace import write_trace

logger = logging.getLogger("dataloader")

STAGES = ("read", "fetch", "transform", "collate", "transport", "wait", "preload")
_DEFAULT_FREQUENCY = 10
# Seconds between reports unless a batch count is asked for: a report every few batches of an
# endless epoch wrote megabytes a minute; one every 10 s is a few lines a minute at any speed.
_DEFAULT_INTERVAL = 10.0
# Events kept one by one, per kind: at about 0.5 KB a batch, at most ~10 MB however long the
# epoch. Counts, totals and means cover the whole epoch; p50, p95 and the trace the kept ones.
KEEP = 10_000


@dataclass(frozen=True)
class MonitorSettings:
    """What the environment asked for when an iterator started.

    Reports are on when ``log_every`` (batches) or ``log_interval`` (seconds) is set; with
    both, a report comes every ``log_every`` batches at most once per ``log_interval``.
    """

    log_every: int | None = None
    trace_path: str | None = None
    log_interval: float | None = None

    @property
    def reporting(self) -> bool:
        return self.log_every is not None or self.log_interval is not None

    def make_visible(self) -> None:
        """With monitoring asked for, make sure its INFO reports reach the terminal.

        Python shows only warnings unless logging is configured; a user who set
        DATALOADER_MONITOR=1 wants to see the tables, so the ``dataloader``
        logger gets INFO level and, if no handler is configured anywhere, one
        to stderr.
        """
        if not self.reporting or logger.isEnabledFor(logging.INFO):
            return
        logger.setLevel(logging.INFO)
        if not logger.hasHandlers():
            logger.addHandler(logging.StreamHandler())

    @classmethod
    def from_env(cls, environ: Any = None) -> "MonitorSettings":
        env = os.environ if environ is None else environ
        trace_path = _trace_path(env.get("DATALOADER_TRACE") or None)
        if not _truthy(env.get("DATALOADER_MONITOR", env.get("MGE_DATA_MONITOR", ""))):
            return cls(None, trace_path)
        raw = env.get("DATALOADER_MONITOR_FREQUENCY", env.get("MGE_DATA_MONITOR_FREQUENCY", ""))
        frequency = _frequency(raw) if raw else None
        raw_interval = env.get("DATALOADER_MONITOR_INTERVAL", "")
        interval = _interval(raw_interval) if raw_interval else None
        if frequency is None and interval is None:
            interval = _DEFAULT_INTERVAL
        return cls(frequency, trace_path, interval)


def _trace_path(path: str | None) -> str | None:
    """``path``, or None (with a warning now, as the epoch starts) when no file can be written there.

    A trace that cannot be written must not cost the run: the epoch goes on without it.
    """
    if path is None:
        return None
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path) or not os.path.isdir(folder):
        problem = "is a directory" if os.path.isdir(path) else f"is in {folder!r}, which is not a directory"
        logger.warning(
            "DATALOADER_TRACE=%r %s; this epoch runs without a trace. "
            "Point DATALOADER_TRACE at a file in an existing directory.",
            path,
            problem,
        )
        return None
    return path


def _frequency(raw: str) -> int:
    try:
        return max(1, int(raw))
    except ValueError:
        logger.warning("DATALOADER_MONITOR_FREQUENCY=%r is not an integer; using %d", raw, _DEFAULT_FREQUENCY)
        return _DEFAULT_FREQUENCY


def _interval(raw: str) -> float:
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not 0 <= seconds < math.inf:
        logger.warning(
            "DATALOADER_MONITOR_INTERVAL=%r is not a number of seconds >= 0; using %g", raw, _DEFAULT_INTERVAL
        )
        return _DEFAULT_INTERVAL
    return seconds


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
class TuningChange:
    """One decision of the autotuner (``num_workers="auto"``): the settings from then on and why.

    ``batch`` is the count of batches handed out when it was made, ``seconds`` the time since
    the epoch started; ``workers`` and ``prefetch`` are the settings after it.
    """

    batch: int
    seconds: float
    workers: int
    prefetch: int
    reason: str

    def describe(self) -> str:
        """One line: "2 -> 3 workers at batch 140 (1.9 s): the loop waited 38% of ..."."""
        head, _, tail = self.reason.partition(": ")
        return f"{head} at batch {self.batch} ({self.seconds:.1f} s): {tail}" if tail else f"{head} at batch {self.batch}"


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
    stages: dict[str, Any] = field(default_factory=dict)
    verdict: str = ""
    # Samples that failed and were left out or replaced (on_error="skip"/"replace"), and the
    # records of the first of them (SampleFailure: index, stage, exception, worker).
    failed_samples: int = 0
    failures: tuple[Any, ...] = ()
    # What the autotuner (num_workers="auto") decided this epoch, oldest first.
    tuning: tuple[TuningChange, ...] = ()

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
        if self.failed_samples:
            actions = sorted({record.action for record in self.failures})
            lines.append(f"bad samples: {self.failed_samples} failed ({', '.join(actions)}); first: {self.failures[0].describe()}")
        if self.tuning:
            changes = len(self.tuning)
            lines.append(f"autotune: {changes} decision{'s' * (changes != 1)}; latest: {self.tuning[-1].describe()}")
        lines.append(f"verdict: {self.verdict}")
        return "\n".join(lines)


class Recorder:
    """Collects the timings of one epoch (thread-safe for one writer per kind of event)."""

    def __init__(
        self, num_workers: int, settings: MonitorSettings | None = None, worker_type: str = "process",
        keep: int | None = None, book: FailureBook | None = None,
    ) -> None:
        self.num_workers = num_workers
        self.book = book or FailureBook()  # failed samples: count, records, log, max_errors
        self.worker_type = worker_type
        self.settings = settings or MonitorSettings()
        self.started = perf_counter()
        # (worker, index, start, fetched, transformed, collated, samples, received, transport seconds)
        self.batches: list[tuple[Any, ...]] = []
        self.waits: list[tuple[float, float]] = []
        self.preloads: list[tuple[float, float]] = []
        self.reads: list[tuple[float, float]] = []  # a stream read in this process, per task
        # Older events, folded out of the lists above once one holds 2 * keep (see KEEP).
        self.folded = _Sums()
        self._lock = threading.Lock()
        self.handed_out = 0
        self._keep = max(KEEP if keep is None else keep, self.settings.log_every or 0)
        self._fold_at = 2 * self._keep  # a kind's list is folded when it holds this many
        self._reporting = self.settings.reporting
        self._reported = (0, self.started)  # batches handed out and time at the latest report
        self.pids: dict[int, int] = {}
        self.shared_memory: Callable[[], int] = lambda: 0
        # The autotuner: what it decided, the worker counts over time, and its meter (told of
        # every batch made and handed out).
        self.tuning: list[TuningChange] = []
        self.meter: Any = None
        self._written = False
        self._cores = os.cpu_count() or 1

    def batch_made(
        self, worker: int, index: int, times: Any, received: float | None = None, transport: float = 0.0,
        nbytes: int = 0,
    ) -> None:
        """Batch ``index`` was made by ``worker`` (-1: this process) and reached the executor at
        ``received``, ``nbytes`` long in transit."""
        if times is None:
            return
        # (worker, index, start, fetched, transformed, collated, samples, received, transport)
        self.batches.append((worker, index, *times, times[3] if received is None else received, transport))
        if len(self.batches) >= self._fold_at:
            self._fold("batches")
        if self.meter is not None:
            self.meter.made(times[3] - times[0], nbytes)

    def samples_failed(self, records: tuple[Any, ...]) -> None:
        """Samples of a batch failed and were left out or replaced; raises
        :class:`~dataloader.TooManyBadSamplesError` past ``max_errors``."""
        self.book.add(records, self._samples_read)

    def epoch_ended(self) -> None:
        """The epoch ran out: judge a ``max_errors`` fraction on the whole of it."""
        if self.book.count:
            self.book.check(self._samples_read())

    def _samples_read(self) -> int:
        """Samples read so far: the ones in batches made, and the ones that failed."""
        with self._lock:
            made = self.folded.samples + sum(batch[6] for batch in self.batches)
        return int(made) + self.book.count

    def preloaded(self, start: float, end: float) -> None:
        self.preloads.append((start, end))
        if len(self.preloads) >= self._fold_at:
            self._fold("preloads")

    def read(self, start: float, end: float) -> None:
        """This process read a batch's samples from the stream (``parallel_stream=False``)."""
        self.reads.append((start, end))
        if len(self.reads) >= self._fold_at:
            self._fold("reads")

    def tuned(self, change: TuningChange) -> None:
        """The autotuner changed the settings (``change.seconds`` after the epoch started)."""
        self.tuning.append(change)
        self.num_workers = change.workers

    def waited(self, start: float, end: float) -> None:
        self.waits.append((start, end))
        self.handed_out += 1
        if self.meter is not None:
            self.meter.waited(end - start)
        if len(self.waits) >= self._fold_at:
            self._fold("waits")
        if self._reporting and self._report_due(end) and logger.isEnabledFor(logging.INFO):
            # The batches since the last report only: a summary of everything so far would
            # cost more with every report.
            last = min(self.handed_out - self._reported[0], len(self.waits))
            self._reported = (self.handed_out, end)
            logger.info(
                "DataLoader stages after %d batches (the last %d):\n%s",
                self.handed_out, last, self.snapshot(last=last).table(),
            )

    def _report_due(self, now: float) -> bool:
        """Whether a periodic report is due (see :class:`MonitorSettings`)."""
        every, interval = self.settings.log_every, self.settings.log_interval
        done, at = self._reported
        if every is not None and self.handed_out - done < every:
            return False
        return interval is None or now - at >= interval

    def _fold(self, kind: str) -> None:
        """Fold the oldest ``keep`` events of ``kind`` into ``folded``. Each kind has one writer
        thread (the one calling here), but kinds have different ones, and a snapshot may be
        taken from any: the lock keeps the list and the sums a snapshot reads in step."""
        with self._lock:
            events = getattr(self, kind)
            old, kept = events[: self._keep], events[self._keep :]
            if kind == "batches":
                sums = _sum_batches(old, self.num_workers > 0)
            else:
                sums = _Sums({_SPAN_STAGES[kind]: (len(old), sum(_spans(old)))})
            setattr(self, kind, kept)
            self.folded = self.folded + sums

    def finish(self) -> None:
        """End of the epoch (or close): close the error log, write the trace if one was asked for."""
        self.book.close()
        if self.settings.trace_path and not self._written and self.batches:
            self._written = True
            try:
                write_trace(self, self.settings.trace_path)
            except OSError as error:
                # The end of an epoch is no place to fail a run over its trace.
                logger.warning("DATALOADER_TRACE: could not write the trace: %s", error)

    def snapshot(self, last: int | None = None) -> Stats:
        """The epoch so far, or only its ``last`` batches (at most the kept ones, see KEEP)."""
        # Copies (slices), taken with the sums they go with: the writers go on appending while
        # this reads. A periodic report copies only its last few batches.
        start = -last if last is not None else 0
        with self._lock:
            batches, waits_list, preloads_list = self.batches[start:], self.waits[start:], self.preloads[start:]
            reads_list = self.reads[start:]
            folded = self.folded if last is None else _NOTHING_FOLDED
        started = self.started if last is None or not waits_list else waits_list[0][0]
        # Plain Python on purpose: a report covers a few batches, where NumPy's per-call
        # overhead costs more than the arithmetic (and a whole epoch is still a millisecond).
        made, recent = _columns(batches, self.num_workers > 0)
        durations = {"read": _spans(reads_list), **made}
        durations["wait"] = _spans(waits_list)
        durations["preload"] = _spans(preloads_list)
        # Folding keeps at least `keep` events of each kind, so every folded stage has values here.
        stages = {
            name: _summary(values, *folded.stages.get(name, (0, 0.0)))
            for name, values in durations.items()
            if values
        }
        end = max(perf_counter() if not waits_list else waits_list[-1][1], started)
        elapsed = max(end - started, 1e-9)
        samples = int(folded.samples + recent.samples)
        first, last_end = min(folded.first, recent.first), max(folded.last, recent.last)
        busy = sum(stages[name].total for name in ("fetch", "transform", "collate") if name in stages)
        # Measured from the first batch's start: worker start-up is not idleness.
        span = last_end - first if last_end > first else 0.0
        sizes = [(self.started + change.seconds, change.workers) for change in self.tuning]
        capacity = _worker_seconds(sizes, first, last_end) if sizes else self.num_workers * span
        utilization = min(1.0, busy / capacity) if self.num_workers and capacity > 0 else None
        waited = stages.get("wait")
        stats: dict[str, Any] = dict(
            batches=waited.count if waited else 0,
            samples=samples,
            elapsed=elapsed,
            samples_per_second=samples / elapsed,
            wait_fraction=min(1.0, (waited.total if waited else 0.0) / elapsed),
            worker_utilization=utilization,
            shared_memory_bytes=int(self.shared_memory()),
            num_workers=self.num_workers,
            stages=stages,
        )
        book = self.book
        said = verdict(stats, self._cores)
        if self.tuning and "num_workers" in said:
            said += " (num_workers='auto' sizes the pool itself: its latest decision says why it is this size)"
        return Stats(
            **stats, verdict=said, failed_samples=book.count, failures=tuple(book.records), tuning=tuple(self.tuning),
        )


@dataclass(frozen=True)
class _Sums:
    """Totals over some events: ``stages`` maps a stage to (count, seconds); ``first`` and
    ``last`` are the earliest batch start and the latest batch end."""

    stages: dict[str, Any] = field(default_factory=dict)
    samples: int = 0
    first: float = math.inf
    last: float = -math.inf

    def __add__(self, other: "_Sums") -> "_Sums":
        stages = dict(self.stages)
        for name, (count, total) in other.stages.items():
            mine = stages.get(name, (0, 0.0))
            stages[name] = (mine[0] + count, mine[1] + total)
        return _Sums(stages, self.samples + other.samples, min(self.first, other.first), max(self.last, other.last))


_NOTHING_FOLDED = _Sums()  # never changed: ``+`` makes a new one
_SPAN_STAGES = {"waits": "wait", "preloads": "preload", "reads": "read"}  # Recorder list -> stage


def _columns(batches: list[tuple[Any, ...]], transport: bool) -> tuple[dict[str, list[float]], _Sums]:
    """Each batch's fetch, transform, collate (and with workers, transport) seconds, and the
    batches' samples, earliest start and latest end (one pass over ``batches``)."""
    if not batches:
        return {"fetch": [], "transform": [], "collate": [], "transport": []}, _NOTHING_FOLDED
    _, _, start, fetched, transformed, collated, samples, _, moved = zip(*batches)
    durations = {
        "fetch": list(map(sub, fetched, start)),
        "transform": list(map(sub, transformed, fetched)),
        "collate": list(map(sub, collated, transformed)),
        "transport": list(moved) if transport else [],
    }
    return durations, _Sums({}, sum(samples), min(start), max(collated))


def _worker_seconds(sizes: list[tuple[float, int]], start: float, end: float) -> float:
    """Worker-seconds between ``start`` and ``end`` of a pool sized ``sizes`` (from each time on)."""
    total = 0.0
    for (at, count), (until, _) in zip(sizes, [*sizes[1:], (end, 0)]):
        low, high = max(at, start), min(until, end)
        if high > low:
            total += count * (high - low)
    before = sizes[0][0] - start  # the first size holds from the epoch's start
    return total + (sizes[0][1] * min(before, end - start) if before > 0 else 0.0)


def _spans(spans: list[tuple[float, float]]) -> list[float]:
    return [stop - go for go, stop in spans]


def _sum_batches(batches: list[tuple[Any, ...]], transport: bool) -> _Sums:
    """The stage totals, samples and span of ``batches``."""
    durations, sums = _columns(batches, transport)
    stages = {name: (len(v), sum(v)) for name, v in durations.items() if v}
    return _Sums(stages, sums.samples, sums.first, sums.last)


def _summary(values: list[float], folded_count: int = 0, folded_total: float = 0.0) -> StageSummary:
    """Count, total and mean over ``values`` and the folded ones; p50 and p95 over ``values``."""
    ordered = sorted(values)  # nearest-rank percentiles
    count = len(ordered)
    total = sum(ordered) + folded_total
    p50, p95 = ordered[(count - 1) // 2], ordered[min(count - 1, math.ceil(0.95 * count) - 1)]
    return StageSummary(count + folded_count, total, total / (count + folded_count), p50, p95)


# Below this the consumer barely waits: the loader keeps up.
_WAIT_LOW = 0.1
# Above this workers have no idle time left to give.
_BUSY_HIGH = 0.8


def verdict(stats: dict[str, Any], cores: int) -> str:
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
    read = stages.get("read")
    making = sum(stages[s].total for s in ("fetch", "transform", "collate") if s in stages)
    if read is not None and read.total > making / max(1, workers):
        return (
            f"stream-bound: {waited}, and reading the stream in this process took {read.mean * 1e3:.1f} ms "
            "a batch, more than making it -> make the stream faster (for RayStream: more Ray CPUs), or, "
            "if it can shard itself by get_worker_info(), read it in the workers (parallel_stream=True)"
        )
    if workers == 0:
        return (
            f"input-bound: {waited} while batches were made in this process ({heaviest} dominates) "
            f"-> set num_workers (up to {cores} cores available)"
        )
    transport = stages.get("transport")
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


def _heaviest_stage(stages: dict[str, Any]) -> str:
    making = {s: stages[s].total for s in ("fetch", "transform", "collate") if s in stages}
    return max(making, key=making.__getitem__) if making else "fetch"
