"""What a columnar stream reports of an epoch (``ParquetStream.stats()``), counted as it is read."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StreamStats:
    """One epoch as this process saw it (see ``ParquetStream.stats``)."""

    epoch: int
    rows: int  # rows this process delivered so far in the epoch (after the filter)
    shard_rows: int  # rows of the files in this process's shard (before the filter)
    dropped: int  # the epoch's surplus, dropped (equal=True, surplus="drop"); the same everywhere
    carried: int  # the epoch's surplus, carried into the next one (surplus="carry")
    carried_in: int  # rows the previous epoch carried into this one (they come first)
    # An epoch resumed on another world size (load_state_dict(states)) counts in dropped or carried
    # the old world's surplus too.


class Progress:
    """The mutable side of :class:`StreamStats`: the delivered rows are counted as they go."""

    def __init__(self, epoch: int, shard_rows: int, surplus: int, carry: bool, carried_in: int) -> None:
        self.epoch, self.shard_rows, self.carried_in = epoch, shard_rows, carried_in
        self.dropped, self.carried = (0, surplus) if carry else (surplus, 0)
        self.rows = 0

    def snapshot(self) -> StreamStats:
        return StreamStats(self.epoch, self.rows, self.shard_rows, self.dropped, self.carried, self.carried_in)
