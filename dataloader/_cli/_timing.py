"""One timed run of a loader on this machine, for ``python -m dataloader bench`` and ``tune``.

:func:`measure_loader` builds ``DataLoader(**options)``, takes batches for ``warmup_s`` untimed
seconds (at least one batch: start-up, and the autotuner's first steps), then times ``seconds``
more. Where the data runs out first, it goes on with the next epoch. Meanwhile a
:class:`~dataloader.memory.PeakMemory` thread keeps the peak PSS of this process and its
workers. At the end it reads ``loader.stats()`` before the loader closes: the worker count in use and, for
``num_workers="auto"``, the autotuner's decisions.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Iterator

from .. import DataLoader
from ..memory import PeakMemory

#: The most ``--seconds`` a timed run of ``bench`` or ``tune`` may take: an hour is far past what a
#: rate needs to settle, and a typo such as ``1e308`` (finite, so ``> 0`` lets it through) would
#: otherwise be a run that never ends.
MOST_SECONDS = 3600.0

#: The fields of a ``stats().tuning`` record that a report keeps (with its ``describe()``).
TUNING_FIELDS = ("batch", "seconds", "workers", "prefetch", "reason")


@dataclasses.dataclass
class Measured:
    """What one run gave."""

    rate: float  # samples/s over the timed part (NaN when no batch was timed)
    batches: int  # batches taken in all, warm-up included
    epochs: int  # epochs started: more than 1 where the data ran out before the time
    peak_pss: int  # bytes, the process tree's peak (RSS where PSS cannot be read)
    num_workers: int | None  # stats().num_workers at the end: the count in use
    tuning: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    @property
    def reason(self) -> str | None:
        """Why the autotuner made its last decision; None where it made none."""
        return str(self.tuning[-1]["reason"]) if self.tuning else None

    @property
    def prefetch(self) -> Any:
        """The prefetch depth the autotuner's last decision set; None where it made none."""
        return self.tuning[-1]["prefetch"] if self.tuning else None


def measure_loader(options: dict[str, Any], seconds: float, memory: PeakMemory,
                   warmup_s: float = 0.0, default_batch: int = 1) -> Measured:
    """Time ``DataLoader(**options)`` for ``seconds`` after ``warmup_s`` (see the module's
    docstring). Errors of the options or the data propagate, with the workers stopped."""
    memory.reset()
    loader = DataLoader(**options)
    batches: Iterator[Any] | None = None
    epochs, stats = 0, None

    def next_epoch() -> Iterator[Any]:
        nonlocal batches, epochs
        with memory.paused():  # fixed workers start in iter(loader)
            batches = iter(loader)
        epochs += 1
        return batches

    try:
        rate, taken = time_batches(lambda: _epochs(next_epoch), seconds, warmup_s, default_batch)
        memory.sample()
        stats = _stats(loader)
    finally:
        close = getattr(batches, "close", None)
        if close is not None:
            close()
        loader.close()
    return Measured(rate=rate, batches=taken, epochs=epochs, peak_pss=memory.peak_pss,
                    num_workers=getattr(stats, "num_workers", None), tuning=tuning_records(stats))


def time_batches(start: Callable[[], Iterator[Any]], seconds: float, warmup_s: float,
                 default_batch: int = 1) -> tuple[float, int]:
    """(samples/s over ``seconds`` after ``warmup_s`` and one batch, batches taken) of the
    batches ``start()`` yields; the rate is NaN where they end before any batch is timed."""
    began = time.perf_counter()
    timer, taken, timed = None, 0, 0
    for batch in start():
        taken += 1
        now = time.perf_counter()
        if timer is None:
            if now - began >= warmup_s:
                timer = now  # this batch ends the warm-up; the next ones are timed
            continue
        timed += batch_samples(batch, default_batch)
        if now - timer >= seconds:
            break
    elapsed = time.perf_counter() - timer if timer is not None else 0.0
    return (timed / elapsed if timed and elapsed > 0 else float("nan")), taken


def batch_samples(batch: Any, default: int) -> int:
    """Samples in ``batch``: the length of its first array (or of a list of strings);
    ``default`` where it has none."""
    first = batch
    while isinstance(first, (tuple, list, dict)):
        if not first:
            return default
        if isinstance(first, list) and isinstance(first[0], (str, bytes, int, float)):
            return len(first)  # a field of strings or Python numbers, collated as a list
        first = next(iter(first.values())) if isinstance(first, dict) else first[0]
    shape = getattr(first, "shape", None)
    return int(shape[0]) if shape else default


def tuning_records(stats: Any) -> list[dict[str, Any]]:
    """``stats.tuning`` as plain dicts (:data:`TUNING_FIELDS` and ``describe``); [] without."""
    return [{**{name: getattr(record, name, None) for name in TUNING_FIELDS},
             "describe": record.describe()} for record in getattr(stats, "tuning", None) or ()]


def _epochs(next_epoch: Callable[[], Iterator[Any]]) -> Iterator[Any]:
    """Batches of one epoch after another, until an epoch gives none."""
    while True:
        given = False
        for batch in next_epoch():
            given = True
            yield batch
        if not given:
            return


def _stats(loader: DataLoader) -> Any:
    try:
        return loader.stats()
    except RuntimeError:  # no epoch recorded
        return None
