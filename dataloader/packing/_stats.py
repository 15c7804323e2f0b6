"""What a packing did in an epoch: :class:`PackStats`, and the counts behind it."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Mapping


@dataclass(frozen=True)
class PackStats:
    """One epoch of a :class:`~dataloader.PackedStream` as this process packed it (see
    :meth:`PackedStream.stats`). Samples are counted as the packer reads them (a window at a
    time), rows and padding as they are yielded."""

    epoch: int
    samples: int  # samples read from the source, every one counted below included
    tokens: int  # tokens that went into rows (after truncate/drop)
    rows: int  # rows yielded
    padding: int  # padding tokens in the rows yielded
    seq_len: int
    empty_samples: int = 0  # samples of no tokens: they add nothing to a row
    split_samples: int = 0  # samples longer than seq_len cut into pieces (too_long="split")
    truncated_samples: int = 0  # samples longer than seq_len cut to seq_len (too_long="truncate")
    truncated_tokens: int = 0  # the tokens truncation removed
    dropped_samples: int = 0  # samples longer than seq_len left out (too_long="drop")
    dropped_tokens: int = 0  # their tokens

    @property
    def padding_fraction(self) -> float:
        """Padding tokens over all the tokens of the rows yielded (0.0 before any row)."""
        return self.padding / (self.rows * self.seq_len) if self.rows else 0.0


COUNTS = tuple(field.name for field in fields(PackStats) if field.name not in ("epoch", "seq_len"))


class Counts:
    """The mutable counts of :class:`PackStats`; a state saves them as a dict of ints."""

    __slots__ = COUNTS
    samples: int
    tokens: int
    rows: int
    padding: int
    empty_samples: int
    split_samples: int
    truncated_samples: int
    truncated_tokens: int
    dropped_samples: int
    dropped_tokens: int

    def __init__(self, saved: Mapping[str, Any] | None = None) -> None:
        for name in COUNTS:
            setattr(self, name, int((saved or {}).get(name, 0)))

    def saved(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in COUNTS}

    def snapshot(self, epoch: int, seq_len: int) -> PackStats:
        return PackStats(epoch=epoch, seq_len=seq_len, **self.saved())

