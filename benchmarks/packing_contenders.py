"""The packing bench's contenders, how a pass over one is measured, and the bucketing figures.

A packer is a function ``(samples, seq_len, buffer) -> (iterator of rows, stats or None)``;
each row is a dict with ``tokens`` and ``tokens_segment_ids`` (0 on padding), Grain's layout,
which ours shares; ``stats``, ours only, gives the padding the packer counted itself
(``PackedStream.stats().padding``), to check against the padding counted from the rows.
Grain reads the in-memory list as ``grain.MapDataset.source(samples).to_iter_dataset()`` with
``ReadOptions(num_threads=0, prefetch_buffer_size=0)`` (Grain's advice for data already in
memory: no reader threads), and packs with ``FirstFitPackIterDataset`` /
``BestFitPackIterDataset`` (``num_packing_bins=buffer``); ours reads a plain
:class:`~dataloader.StreamDataset` over the same list into ``PackedStream(buffer_size=buffer)``.
Neither shuffles its rows (Grain ``shuffle_bins=False``, ours ``seed=None``), so both measure
packing alone.
"""

from __future__ import annotations

import importlib
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from dataloader import RandomSampler, StreamDataset

GRAIN_FF = "grain first_fit"
GRAIN_BF = "grain best_fit"
OURS_FF = "ours first_fit"
OURS_BF = "ours best_fit"
OURS_CONCAT = "ours concat"

Rows = Iterator[dict[str, np.ndarray]]
Packing = tuple[Rows, "Callable[[], int] | None"]


@dataclass(frozen=True)
class Contender:
    name: str
    needs: str  # "module:name" it imports
    rows: Callable[[list, int, int], Packing]


class ListStream(StreamDataset):
    """The samples of a list, in order, each pass."""

    def __init__(self, samples: list) -> None:
        self.samples = samples

    def __iter__(self) -> Iterator[Any]:
        return iter(self.samples)


def _grain(kind: str) -> Callable[[list, int, int], Packing]:
    def rows(samples: list, seq_len: int, buffer: int) -> Packing:
        import grain

        source = grain.MapDataset.source(samples).to_iter_dataset(
            grain.ReadOptions(num_threads=0, prefetch_buffer_size=0))
        packer = getattr(grain.experimental, kind)
        return iter(packer(source, length_struct={"tokens": seq_len}, num_packing_bins=buffer,
                           shuffle_bins=False)), None
    return rows


def _ours(method: str) -> Callable[[list, int, int], Packing]:
    def rows(samples: list, seq_len: int, buffer: int) -> Packing:
        from dataloader import PackedStream

        stream = PackedStream(ListStream(samples), seq_len, method=method, buffer_size=buffer)
        return iter(stream), lambda: stream.stats().padding
    return rows


CONTENDERS = (
    Contender(GRAIN_FF, "grain.experimental:FirstFitPackIterDataset", _grain("FirstFitPackIterDataset")),
    Contender(GRAIN_BF, "grain.experimental:BestFitPackIterDataset", _grain("BestFitPackIterDataset")),
    Contender(OURS_FF, "dataloader:PackedStream", _ours("first_fit")),
    Contender(OURS_BF, "dataloader:PackedStream", _ours("best_fit")),
    Contender(OURS_CONCAT, "dataloader:PackedStream", _ours("concat")),
)


def missing(contender: Contender) -> str | None:
    """Why ``contender`` cannot run here (what it needs is not importable), or None."""
    module, name = contender.needs.split(":")
    try:
        getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return f"{module}.{name} is not importable"
    return None


@dataclass
class Pass:
    """One pass of a packer over every sample: rows, padding and time."""

    rows: int
    padding: int
    tokens: int
    seconds: float


def measure(rows: Rows, seq_len: int) -> Pass:
    """Consume every row (read its last token, count its padding from the segment ids);
    timed from the first ``next`` to the end, so a packer's set-up counts."""
    count = padding = 0
    start = time.perf_counter()
    for row in rows:
        padding += seq_len - int(np.count_nonzero(row["tokens_segment_ids"]))
        int(row["tokens"][-1])
        count += 1
    elapsed = time.perf_counter() - start
    return Pass(count, padding, count * seq_len - padding, elapsed)


def batch_padding(batches: Sequence[Sequence[int]], lengths: np.ndarray) -> dict:
    """Padding of batches padded to their longest sample: ``1 - tokens / sum(len(b) * max)``,
    with the batch count and the mean samples per batch."""
    sizes = np.fromiter((len(b) for b in batches), np.int64, len(batches))
    order = np.concatenate([np.asarray(b, np.int64) for b in batches])
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    longest = np.maximum.reduceat(lengths[order], starts)
    padded = int((sizes * longest).sum())
    return {"batches": int(sizes.size), "mean_samples": float(sizes.mean()),
            "padding_fraction": 1 - int(lengths[order].sum()) / padded}


def bucket_rows(lengths: np.ndarray, max_tokens: int, batch_size: int, seed: int = 0) -> list[dict]:
    """Padding of ``BucketSampler`` batches (``max_tokens``, then ``batch_size``) against
    ``RandomSampler`` batches of the same mean size and of ``batch_size``, over one epoch."""
    from dataloader import BucketSampler

    dataset = range(len(lengths))
    by_tokens = batch_padding(list(BucketSampler(dataset, lengths, max_tokens=max_tokens, seed=seed)),
                              lengths)
    same = max(1, round(by_tokens["mean_samples"]))
    by_size = batch_padding(list(BucketSampler(dataset, lengths, batch_size=batch_size, seed=seed)),
                            lengths)
    rows = [{"sampler": f"BucketSampler(max_tokens={max_tokens})", **by_tokens}]
    rows.append({"sampler": f"RandomSampler(batch_size={same})",
                 **batch_padding(list(RandomSampler(dataset, same, seed=seed)), lengths)})
    rows.append({"sampler": f"BucketSampler(batch_size={batch_size})", **by_size})
    rows.append({"sampler": f"RandomSampler(batch_size={batch_size})",
                 **batch_padding(list(RandomSampler(dataset, batch_size, seed=seed)), lengths)})
    return rows
