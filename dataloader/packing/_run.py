"""One ``iter()`` of a packer in one process: windows read, packed and yielded, and where it
stands between two rows (what ``state_dict()`` and ``stats()`` read)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np

from ._checks import pad_for
from ._fields import Fields
from ._fit import Placement, best_fit_decreasing, concat_cuts, first_fit, pieces
from ._rows import Rows, build
from ._source import Source
from ._stats import Counts, PackStats
from ._window import Reader, Window, decode_carry, encode_carry

PACK_STREAM = 0x7061636B  # keeps the packer's row shuffles apart from every other user of the seed


@dataclass(frozen=True)
class Plan:
    """What a packer packs with: the arguments an ``iter()`` needs, checked."""

    source: Source
    seq_len: int
    method: str
    buffer_size: int
    fields: tuple[str, ...] | None
    pads: Any  # a scalar, or {field: scalar}
    too_long: str
    seed: int | None
    transform: Callable[[Any], Any] | None


class Run:
    """One process's pass over one epoch, from a saved state or from the start.

    The state names the window being yielded by where the source stood when it started
    (``start``), the carry it started with (a held-back row, or concat's rest), and the rows of it already yielded; a
    resume reads that window again, packs it again and skips those rows. Every count is
    updated before a row is handed out, so :meth:`state` between two rows is exact.
    """

    def __init__(self, plan: Plan, epoch: int, rank: int, worker: int, where: str, resume: dict[str, Any] | None) -> None:
        resume = resume or {}
        self.plan, self.epoch, self.key = plan, epoch, (rank, worker)
        self.fields = Fields(plan.fields, where)
        self.fields.restore(resume.get("layout"))
        self.window = int(resume.get("window", 0))
        self.start = resume.get("source")  # the source's position at this window's start
        self.carry = resume.get("carry")  # the carry this window started with (encoded)
        self.skip = int(resume.get("emitted", 0))
        self.emitted = 0
        self.counts = Counts(resume.get("stats"))
        self.at_start = self.counts.saved()  # the counts at this window's start
        self._pads: dict[str, Any] = {}  # each field's pad value in its dtype, once the fields are known

    def state(self) -> dict[str, Any]:
        """Where the next row comes from, as plain values (see ``PackedStream.state_dict``)."""
        return {"epoch": self.epoch, "window": self.window, "source": self.start, "carry": self.carry,
                "emitted": self.emitted, "layout": self.fields.saved(), "stats": self.at_start}

    def snapshot(self) -> PackStats:
        return self.counts.snapshot(self.epoch, self.plan.seq_len)

    def rows(self) -> Iterator[dict[str, Any]]:
        """The epoch's rows, from the state's window and row on."""
        plan = self.plan
        plan.source.check_resume(self.start)
        items = plan.source.open(self.epoch, self.start)
        budget = plan.buffer_size * plan.seq_len
        reader = Reader(items, self.fields, plan.transform, plan.too_long, plan.seq_len, budget, self.counts)
        carry = decode_carry(self.carry)
        while True:
            window = reader.window(carry)
            after = plan.source.position(self.counts.samples)  # right after its last sample
            rows, carry = self._pack(window)
            padding = (rows.segment_ids == 0).sum(axis=1).tolist() if rows is not None else []
            for number in self._order(len(padding)):
                self.emitted += 1
                self.counts.rows += 1
                self.counts.padding += padding[number]
                if self.emitted > self.skip:
                    yield rows.row(number)  # type: ignore[union-attr]  # rows is None only with no rows
            if window.ended:
                return
            self.window, self.start, self.carry, self.emitted, self.skip = self.window + 1, after, encode_carry(carry), 0, 0
            self.at_start = self.counts.saved()

    def _pack(self, window: Window) -> tuple[Rows | None, Window | None]:
        """The window's rows (None where it has no tokens), and concat's carry into the next window."""
        plan, lengths = self.plan, window.lengths
        if not window.tokens:
            return None, None
        if plan.method == "concat":
            placement, used = concat_cuts(lengths, plan.seq_len, window.ended)
            carry = _rest(window, used)
        else:
            source, length, follows = pieces(lengths, plan.seq_len)
            if plan.method == "first_fit":
                row, offset, count = first_fit(length, plan.seq_len, follows)
            else:
                carried = int(np.count_nonzero(source < window.carried))
                row, offset, count = best_fit_decreasing(length, plan.seq_len, carried)
            placement = Placement(source, length, row, offset, count)
            placement, carry = (placement, None) if window.ended else _hold_back(window, placement, plan.seq_len)
        if not placement.rows:
            return None, carry
        return build(window.columns, self._fitted(window.columns), placement, plan.seq_len), carry

    def _fitted(self, columns: dict[str, np.ndarray]) -> dict[str, Any]:
        """Each field's pad value, checked against the field's dtype once (the layout is fixed)."""
        if len(self._pads) != len(columns):
            pads = self.plan.pads
            self._pads = {name: pad_for(name, pads.get(name, 0) if isinstance(pads, dict) else pads, column.dtype)
                          for name, column in columns.items()}
        return self._pads

    def _order(self, count: int) -> list[int]:
        """The window's rows in creation order, or shuffled by ``(seed, epoch, rank, worker, window)``."""
        if self.plan.seed is None or count < 2:
            return list(range(count))
        rng = np.random.default_rng([self.plan.seed, PACK_STREAM, self.epoch, *self.key, self.window])
        order: list[int] = rng.permutation(count).tolist()
        return order


def _hold_back(window: Window, placement: Placement, seq_len: int) -> tuple[Placement, Window | None]:
    """The window's emptiest row held back: its pieces go first into the next window (a carry of
    at most ``seq_len`` tokens), where more samples can fill the room it had; the other rows as
    they are. Without this the last rows of every window go out half empty. A full row (a piece
    of ``seq_len``: a long sample's first pieces) is never held back, so a split sample's pieces
    still come in order, and neither is a row holding tokens held back already: no token waits
    more than one window."""
    if placement.rows < 2:
        return placement, None
    fill = np.bincount(placement.row, weights=placement.length, minlength=placement.rows)
    fill[placement.row[placement.source < window.carried]] = seq_len  # held back once already
    emptiest = int(fill.argmin())
    if fill[emptiest] >= seq_len:
        return placement, None
    held = placement.row == emptiest
    kept = ~held
    order = np.argsort(placement.source[held], kind="stable")  # the held pieces in their order in the window
    starts, lengths = placement.source[held][order], placement.length[held][order]
    taken = np.concatenate([np.arange(start, start + size) for start, size in zip(starts.tolist(), lengths.tolist())])
    columns = {name: column[taken] for name, column in window.columns.items()}  # copies: not the window's
    row = placement.row[kept]
    rows = Placement(placement.source[kept], placement.length[kept], row - (row > emptiest),
                     placement.offset[kept], placement.rows - 1)
    return rows, Window(columns, lengths.astype(np.int64), False)


def _rest(window: Window, used: int) -> Window | None:
    """The tokens of ``window`` from ``used`` on, as pieces of the samples they belong to."""
    ends = np.cumsum(window.lengths)
    first = int(np.searchsorted(ends, used, side="right"))
    if first == len(ends):
        return None
    lengths = window.lengths[first:].copy()
    lengths[0] = ends[first] - used
    columns = {name: column[used:].copy() for name, column in window.columns.items()}  # not the window's
    return Window(columns, lengths, False)
