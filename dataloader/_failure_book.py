"""The bad-sample policy's settings (``on_error``, ``max_errors``), and the main process's
account of one epoch's failed samples: the count, the first records, the JSON-lines error log,
and the ``max_errors`` limit.

Records are made where the samples failed (a worker, or this process) and arrive with their
batch (:class:`~dataloader._stages.bad_samples.SampleFailure`); the book keeps the first
:data:`KEPT` for ``loader.stats()`` and the error, writes every one to the log, and raises
:class:`~dataloader.TooManyBadSamplesError` once the limit is passed.
"""

from __future__ import annotations

import errno
import json
import logging
import math
import os
from time import perf_counter
from typing import IO, Any, Callable

import numpy as np

from .errors import ArgumentTypeError, ArgumentValueError, TooManyBadSamplesError

logger = logging.getLogger("dataloader")

ON_ERROR = ("raise", "skip", "replace")
# Why 5%: corrupt files in large image and video corpora run well under 1%, so a run that
# passes 5% has a broken decoder, path or transform rather than bad files, and should stop
# early instead of training on a fraction of its data. A small dataset may need more.
DEFAULT_MAX_ERRORS = 0.05
# Draws of a substitute (``replace``) before one of the batch's own good samples stands in.
SUBSTITUTE_DRAWS = 8
KEPT = 1000  # records kept one by one; the log has them all
# A fraction is judged once this many samples were read (or at the epoch's end): 1 failure in
# the first batch of 32 is 3%, which says nothing about the epoch.
FRACTION_WINDOW = 1000
_SHOWN = 5  # records quoted in the error


class FailureBook:
    """One epoch's failed samples. ``max_errors`` None: no limit (``on_error="raise"``)."""

    def __init__(self, max_errors: int | float | None = None, log_path: str | None = None) -> None:
        self.max_errors = max_errors
        self.log_path = log_path
        self.count = 0
        self.records: list[Any] = []
        self.times: list[float] = []  # perf_counter at each kept record's arrival (the trace)
        self._log: IO[str] | None = None
        self._log_failed = False

    def add(self, records: tuple[Any, ...], samples_read: Callable[[], int]) -> None:
        """Note ``records``; raise once they pass the limit. ``samples_read()`` (the samples read
        before these failures) is asked for only where a fraction may be passed."""
        limit = self.max_errors
        # Within the count, or within any fraction (a fraction never allows more than every sample).
        within = limit is None or self.count + len(records) <= limit
        read = samples_read() if not within and isinstance(limit, float) else 0
        now = perf_counter()
        self.count += len(records)
        room = KEPT - len(self.records)
        if room > 0:
            self.records.extend(records[:room])
            self.times.extend([now] * min(room, len(records)))
        self._write(records)
        if within or (isinstance(limit, float) and read < FRACTION_WINDOW):
            return
        self.check(read)

    def check(self, samples_read: int) -> None:
        """Raise :class:`TooManyBadSamplesError` if the failures so far pass ``max_errors``."""
        if self.max_errors is None or self.count <= max_errors_allowed(self.max_errors, samples_read):
            return
        limit = (
            f"max_errors={self.max_errors} ({self.max_errors:.1%} of the {samples_read} samples read)"
            if isinstance(self.max_errors, float)
            else f"max_errors={self.max_errors}"
        )
        first = "\n".join(f"  - {record.describe()}" for record in self.records[:_SHOWN])
        more = f"\n  ... ({self.count - _SHOWN} more)" if self.count > _SHOWN else ""
        log = f"Every one is in the error log {self.log_path!r}. " if self.log_path else ""
        error = TooManyBadSamplesError(
            f"{self.count} samples failed in this epoch, more than {limit} allows; the epoch "
            f"stops here. The first:\n{first}{more}\n{log}A rate this high usually means a broken "
            "decoder, path or transform rather than bad files: fix the cause shown above, find the "
            "bad files with `python -m dataloader doctor --scan`, or raise max_errors."
        )
        error.failures = tuple(self.records)
        raise error

    def close(self) -> None:
        """Close the log; a failure (the last lines meet a full disk) is the warning, not an error."""
        self._close_log()

    def _write(self, records: tuple[Any, ...]) -> None:
        if self.log_path is None or self._log_failed:
            return
        try:
            if self._log is None:
                folder = os.path.dirname(os.path.abspath(self.log_path))
                os.makedirs(folder, exist_ok=True)
                self._log = open(self.log_path, "a", encoding="utf-8")
            for record in records:
                self._log.write(json.dumps(record.as_json()) + "\n")
            self._log.flush()
        except OSError as error:
            self._failed(error)
            self._close_log()  # the lines it could not write are dropped with it

    def _close_log(self) -> None:
        log, self._log = self._log, None
        if log is None:
            return
        try:
            log.close()  # closes the file even where the flush before it fails
        except OSError as error:
            self._failed(error)

    def _failed(self, error: OSError) -> None:
        """Warn once: the log is for the user's clean-up, so it must not end the run (docs/bad-samples.md)."""
        if self._log_failed:
            return
        self._log_failed = True
        code = errno.errorcode.get(error.errno or 0, "")
        logger.warning(
            "the error log %r cannot be written (%s%s); failed samples go on being counted",
            self.log_path, f"{code}: " if code else "", error.strerror or error,
            extra={"error_log": self.log_path},  # how doctor --scan knows not to claim the log
        )


def max_errors_allowed(max_errors: int | float, samples: int) -> float:
    """How many failed samples ``max_errors`` allows after ``samples`` were read: the int
    itself, or the fraction of ``samples``."""
    if isinstance(max_errors, float):
        return max_errors * samples
    return float(max_errors)


def check_max_errors(value: Any) -> int | float:
    """``max_errors`` as stored: an int >= 0, or a float fraction in [0, 1]."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ArgumentTypeError(
            f"`max_errors` must be an int (failed samples per epoch) or a float fraction of the "
            f"samples read; got {type(value).__name__}."
        )
    if isinstance(value, (int, np.integer)):
        if value < 0:
            raise ArgumentValueError(f"`max_errors` must be >= 0 failed samples per epoch; got {value}.")
        return int(value)
    if not (math.isfinite(value) and 0.0 <= value <= 1.0):
        raise ArgumentValueError(
            f"`max_errors` as a float is a fraction of the samples read, in [0, 1]; got {value}. "
            "Give an int for a count of failed samples."
        )
    return float(value)
