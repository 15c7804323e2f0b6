"""The plan behind :class:`~dataloader.BucketSampler`: pure NumPy functions of the lengths and
the options, with no state, so that any process (a worker, another rank, a resumed run) can
rebuild an epoch's batches from ``(seed, epoch, lengths, options)``.

The cuts are fixed once, at construction: indices sorted by bucket are cut into batches whose
size depends only on the bucket sizes (:func:`cut_points`), so every epoch has the same number
of batches and an epoch only permutes indices within buckets and batches among themselves
(:func:`epoch_batches`). A rank's share is a simple function of the global list
(:func:`rank_share`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import ArgumentTypeError, ArgumentValueError
from ._reshard import left_after
from ._world import rank_positions

# Default bucket width: the longest length in a bucket is at most 10% above its shortest.
RATIO = 1.1


def lengths_array(lengths: Any, size: int) -> np.ndarray:
    """``lengths`` (a list, a NumPy array, a pyarrow (Chunked)Array of ints, or a pyarrow list
    column, whose value lengths count) as a 1-D int64 array of ``size`` non-negative ints."""
    if type(lengths).__module__.startswith("pyarrow"):  # pyarrow is imported only when given
        lengths = _from_arrow(lengths)
    arr = np.asarray(lengths)
    if arr.ndim != 1 or arr.dtype.kind not in "iu":
        raise ArgumentTypeError(
            f"`lengths` must be a 1-D sequence of integers (one per dataset index); got "
            f"{type(lengths).__name__} of shape {arr.shape} and dtype {arr.dtype}."
        )
    if len(arr) != size:
        raise ArgumentValueError(
            f"`lengths` must have one entry per dataset index: the dataset has {size} and "
            f"`lengths` has {len(arr)}."
        )
    if arr.dtype.kind == "u" and arr.size and arr.max() > np.iinfo(np.int64).max:
        first = int(np.flatnonzero(arr > np.iinfo(np.int64).max)[0])
        raise ArgumentValueError(
            f"`lengths` must fit a 64-bit signed integer; index {first} has length {int(arr[first])}."
        )
    negative = np.flatnonzero(arr < 0)
    if negative.size:
        first = int(negative[0])
        raise ArgumentValueError(
            f"`lengths` must be non-negative; index {first} has length {int(arr[first])}."
        )
    return arr.astype(np.int64)


def _from_arrow(column: Any) -> np.ndarray:
    """A pyarrow (Chunked)Array of ints, or of lists (their lengths), as a NumPy array."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = column.type
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        column = pc.list_value_length(column)
    if column.null_count:
        first = int(np.flatnonzero(pc.is_null(column).to_numpy(zero_copy_only=False))[0])
        raise ArgumentValueError(
            f"`lengths` has {column.null_count} null(s); the first at index {first}. Fill them "
            "(e.g. pyarrow.compute.fill_null) or leave those rows out of the dataset."
        )
    if isinstance(column, pa.ChunkedArray):
        return np.asarray(column.to_numpy())
    return np.asarray(column.to_numpy(zero_copy_only=False))


def check_fits(lengths: np.ndarray, max_tokens: int | None) -> None:
    """Raise when a sample alone is longer than ``max_tokens`` (no batch could hold it)."""
    if max_tokens is None:
        return
    over = np.flatnonzero(lengths > max_tokens)
    if over.size:
        first = int(over[0])
        raise ArgumentValueError(
            f"{over.size} sample(s) are longer than max_tokens={max_tokens}: the first is index "
            f"{first}, of length {int(lengths[first])}. Raise max_tokens to at least "
            f"{int(lengths.max())} (the longest), or leave those samples out of the dataset."
        )


def check_boundaries(boundaries: Any) -> np.ndarray:
    """``boundaries`` as a 1-D int64 array of strictly increasing positive ints."""
    arr = np.asarray(boundaries)
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise ArgumentTypeError(
            f"`boundaries` must be a 1-D sequence of integers; got {type(boundaries).__name__} "
            f"of shape {arr.shape} and dtype {arr.dtype}."
        )
    if arr.size == 0 or arr[0] < 1 or np.any(np.diff(arr) <= 0):
        raise ArgumentValueError(
            f"`boundaries` must be strictly increasing positive integers; got {arr.tolist()!r}. "
            "Bucket k holds lengths in (boundaries[k-1], boundaries[k]]; pass None to choose them "
            "from the lengths."
        )
    return arr.astype(np.int64)


def capacity(longest: np.ndarray, batch_size: int | None, max_tokens: int | None) -> np.ndarray:
    """Indices a batch may hold when its longest sample is ``longest`` (a length of 0 counts as
    1, so that a batch stays bounded): the fewer of ``batch_size`` and what ``max_tokens`` allows."""
    big = np.iinfo(np.int64).max
    cap = np.full(longest.shape, big if batch_size is None else batch_size, dtype=np.int64)
    if max_tokens is not None:
        cap = np.minimum(cap, max_tokens // np.maximum(longest, 1))
    return cap


def default_edges(lengths: np.ndarray, batch_size: int | None, max_tokens: int | None) -> np.ndarray:
    """Bucket edges chosen from the lengths: geometric, each edge ``RATIO`` times the one below
    (one bucket per length where that is finer than a step of 1), then merged upward where a
    bucket holds fewer samples than one full batch of it; a last bucket too small joins the one
    below."""
    low, high = int(lengths.min()), int(lengths.max())
    steps = [max(low, 1)]
    while steps[-1] < high:
        steps.append(max(steps[-1] + 1, int(steps[-1] * RATIO)))
    edges = np.asarray(steps[:-1], dtype=np.int64)  # above the last: everything longer
    counts = np.bincount(np.searchsorted(edges, lengths, side="left"), minlength=len(edges) + 1)
    tops = np.append(edges, high)  # the longest length each bucket may hold
    full = capacity(tops, batch_size, max_tokens)
    kept: list[int] = []
    held = 0
    for k in range(len(edges)):
        held += int(counts[k])
        if held and held >= full[k]:
            kept.append(int(edges[k]))
            held = 0
    if kept and held + int(counts[-1]) < full[-1]:
        kept.pop()  # the top bucket would be short of a batch: it joins the one below
    return np.asarray(kept, dtype=np.int64)


def cut_points(sizes: np.ndarray, caps: np.ndarray) -> np.ndarray:
    """Batch bounds (0 first, the total last) over indices sorted by bucket, bucket ``k`` holding
    ``sizes[k]`` indices and a batch ending in it at most ``caps[k]``. A bucket's leftover joins
    the next one's first batch unless it already holds that bucket's capacity. Buckets ascend in
    length and capacities descend, so a batch holds at most its last bucket's capacity and no
    sample longer than that bucket's longest: its budget holds."""
    bounds = [np.zeros(1, dtype=np.int64)]
    cursor, begin = 0, 0  # the open batch's start; the bucket's
    for size, cap in zip(sizes.tolist(), caps.tolist()):
        if not size:
            continue
        end = begin + size
        if begin - cursor >= cap:  # the open batch is full for this bucket's lengths
            bounds.append(np.asarray([begin], dtype=np.int64))
            cursor = begin
        cuts = np.arange(cursor + cap, end + 1, cap, dtype=np.int64)
        if cuts.size:
            bounds.append(cuts)
            cursor = int(cuts[-1])
        begin = end
    if cursor < begin:
        bounds.append(np.asarray([begin], dtype=np.int64))
    return np.concatenate(bounds)


def epoch_batches(
    bucket: np.ndarray, bounds: np.ndarray, rng: np.random.Generator | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The epoch's global batches: (order, starts, stops), batch ``i`` being
    ``order[starts[i]:stops[i]]``. ``rng`` None: indices by (bucket, index), batches in order;
    else indices by (bucket, random), batches shuffled."""
    if rng is None:
        return np.argsort(bucket, kind="stable"), bounds[:-1], bounds[1:]
    mixed = rng.permutation(len(bucket))
    order = mixed[np.argsort(bucket[mixed], kind="stable")]
    batches = rng.permutation(len(bounds) - 1)
    return order, bounds[:-1][batches], bounds[1:][batches]


def rank_share(
    starts: np.ndarray, stops: np.ndarray, world_size: int, rank: int, drop_last: bool, split: bool
) -> tuple[np.ndarray, np.ndarray]:
    """This rank's (starts, stops): batches rank, rank + W, ... of the global list, every rank
    the same number. ``drop_last``: the remainder is dropped. Else ``split``: the largest
    batches are halved until the count divides (no repeats; budgets hold for a half), and what
    is still missing (fewer indices than batches) repeats batches from the list's start."""
    starts, stops, per_rank = equalized(starts, stops, world_size, drop_last, split)
    positions = rank_positions(rank, world_size, per_rank, len(starts))
    return starts[positions], stops[positions]


def equalized(
    starts: np.ndarray, stops: np.ndarray, world_size: int, drop_last: bool, split: bool
) -> tuple[np.ndarray, np.ndarray, int]:
    """The global list every rank's share is taken from (largest batches halved where ``split``
    and the count does not divide), and the batches per rank (see :func:`rank_share`)."""
    count = len(starts)
    if drop_last:
        return starts, stops, count // world_size
    per_rank = -(-count // world_size)
    if split:
        starts, stops = _split_largest(starts, stops, per_rank * world_size - count)
    return starts, stops, per_rank


def left_batches(
    starts: np.ndarray, stops: np.ndarray, reshards: Any, drop_last: bool, split: bool
) -> tuple[np.ndarray, np.ndarray]:
    """The global batches an epoch has left after the ranks of each earlier world handed out
    theirs (:mod:`dataloader._reshard`), in order: each world's own list, less what it handed out."""
    for reshard in reshards:
        starts, stops, _ = equalized(starts, stops, reshard.world_size, drop_last, split)
        keep = left_after(len(starts), reshard)
        starts, stops = starts[keep], stops[keep]
    return starts, stops


def _split_largest(starts: np.ndarray, stops: np.ndarray, need: int) -> tuple[np.ndarray, np.ndarray]:
    """Halve the ``need`` largest batches (earliest first on ties), each half in its place."""
    while need > 0:
        sizes = stops - starts
        chosen = np.argsort(-sizes, kind="stable")[:need]
        chosen = np.sort(chosen[sizes[chosen] >= 2])
        if not chosen.size:
            break
        middles = starts[chosen] + sizes[chosen] // 2
        firsts = stops.copy()
        firsts[chosen] = middles
        starts = np.insert(starts, chosen + 1, middles)
        stops = np.insert(firsts, chosen + 1, stops[chosen])
        need -= chosen.size
    return starts, stops


def flatten(order: np.ndarray, starts: np.ndarray, stops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The batches as one int64 array and their offsets into it (batch ``i`` is
    ``flat[offsets[i]:offsets[i + 1]]``)."""
    sizes = stops - starts
    offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    steps = np.arange(offsets[-1], dtype=np.int64) + np.repeat(starts - offsets[:-1], sizes)
    return order[steps].astype(np.int64, copy=False), offsets
