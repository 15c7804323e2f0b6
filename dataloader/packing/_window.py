"""Reading a window: samples from the source (after ``transform`` and the ``too_long`` rule)
until their tokens reach the window's budget or the source ends; a sample is never divided
between windows. Also the carry (a held-back row, or concat's rest), as a state saves it."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np
import numpy.typing as npt

from ..errors import CollateError
from ._fields import Fields
from ._stats import Counts

TOO_LONG = ("split", "truncate", "drop", "raise")


@dataclass(frozen=True)
class Window:
    """A window's tokens: per field the samples' tokens concatenated in order (a carry
    first), and each sample's (or carried piece's) length."""

    columns: dict[str, np.ndarray]
    lengths: npt.NDArray[np.int64]
    ended: bool  # the source ran out: no window comes after this one
    carried: int = 0  # how many of the first tokens the window before carried in

    @property
    def tokens(self) -> int:
        return int(self.lengths.sum())


class Reader:
    """Reads windows from one epoch's samples, counting them in ``counts``."""

    def __init__(
        self, items: Iterator[Any], fields: Fields, transform: Callable[[Any], Any] | None, too_long: str,
        seq_len: int, budget: int, counts: Counts,
    ) -> None:
        self._pull = items.__next__  # never iter() again: a stream that is its own iterator may reset
        self.fields, self.transform, self.too_long = fields, transform, too_long
        self.seq_len, self.budget, self.counts = seq_len, budget, counts

    def window(self, carry: Window | None) -> Window:
        """The next window, after the tokens ``carry`` holds (the last window's held-back row, or concat's rest)."""
        parts: list[list[np.ndarray]] = [[] for _ in self.fields.dtypes]
        lengths: list[int] = []
        if carry is not None:
            parts = [[column] for column in carry.columns.values()]
            lengths = carry.lengths.tolist()
        held = int(sum(lengths))  # the carry's tokens count toward the budget, not toward those read
        total, ended, counts, pull = 0, False, self.counts, self._pull
        while held + total < self.budget:
            try:
                sample = pull()
            except StopIteration:
                ended = True
                break
            number = counts.samples
            counts.samples += 1
            arrays = self._arrays(sample, number)
            if arrays is None:
                continue
            if len(parts) < len(arrays):  # the first sample with tokens fixed the fields
                parts = [[] for _ in arrays]
            for part, array in zip(parts, arrays):
                part.append(array)
            lengths.append(len(arrays[0]))
            total += lengths[-1]
        counts.tokens += total
        return Window(self._columns(parts), np.array(lengths, dtype=np.int64), ended, held)

    def _arrays(self, sample: Any, number: int) -> list[np.ndarray] | None:
        """The sample's packed fields after the ``too_long`` rule, or None where it gives no tokens."""
        if self.transform is not None:
            sample = self.transform(sample)
        arrays = self.fields.arrays(sample, number)
        size, counts = len(arrays[0]), self.counts
        if size == 0:
            counts.empty_samples += 1
            return None
        if size <= self.seq_len:
            return arrays
        if self.too_long == "split":
            counts.split_samples += 1
            return arrays
        if self.too_long == "truncate":
            counts.truncated_samples += 1
            counts.truncated_tokens += size - self.seq_len
            return [array[: self.seq_len] for array in arrays]
        if self.too_long == "drop":
            counts.dropped_samples += 1
            counts.dropped_tokens += size
            return None
        raise CollateError(
            f"PackedStream: sample {number} of the epoch{self.fields.where} has {size} tokens, more "
            f"than seq_len={self.seq_len}, and too_long='raise'. Pass too_long='split' (pieces, each its "
            "own segment), 'truncate' (keep the first seq_len tokens) or 'drop' (leave it out, counted "
            "in stats()), or a larger seq_len."
        )

    def _columns(self, parts: list[list[np.ndarray]]) -> dict[str, np.ndarray]:
        names, dtypes, trailing = self.fields.names or (), self.fields.dtypes, self.fields.trailing
        return {
            name: np.concatenate(part, dtype=dtype, casting="same_kind") if part else np.empty((0, *shape), dtype)
            for name, part, dtype, shape in zip(names, parts, dtypes, trailing)
        }


def encode_carry(carry: Window | None) -> str | None:
    """A carry as one string (JSON): per field its dtype, shape and bytes (base64), and
    the lengths of its pieces. Made once per window; a state copies a string for nothing."""
    if carry is None or not len(carry.lengths):
        return None
    columns = {
        name: {"dtype": column.dtype.str, "shape": list(column.shape),
               "data": base64.b64encode(np.ascontiguousarray(column).tobytes()).decode("ascii")}
        for name, column in carry.columns.items()
    }
    return json.dumps({"fields": columns, "lengths": carry.lengths.tolist()})


def decode_carry(text: str | None) -> Window | None:
    """What :func:`encode_carry` made, back as a window of tokens."""
    if text is None:
        return None
    saved = json.loads(text)
    columns = {
        name: np.frombuffer(base64.b64decode(field["data"]), dtype=np.dtype(field["dtype"])).reshape(field["shape"]).copy()
        for name, field in saved["fields"].items()
    }
    return Window(columns, np.array(saved["lengths"], dtype=np.int64), False)
