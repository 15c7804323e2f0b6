"""``BucketSampler``: batches of indices of similar length, by count or by a token budget.

Padding a batch to its longest sample wastes what the shorter ones leave empty; grouping
samples of similar length keeps that waste small, and a token budget (``max_tokens``) keeps
the padded size of every batch, which memory and compute pay for, under a bound.
"""

from __future__ import annotations

from typing import Any, Iterator, Sized

import numpy as np

from . import _bucket_plan as plan
from ._digest import digest_array
from ._validate import check_bool, check_positive_int
from .errors import ArgumentValueError
from ._index_batches import split_at
from .sampler import MapSampler

__all__ = ["BucketSampler"]


class BucketSampler(MapSampler):
    """A map batch sampler that groups indices of similar length.

    ``lengths`` has one non-negative int per dataset index: a list, a NumPy array, a pyarrow
    (Chunked)Array of ints, or a pyarrow list column (the token column itself: its value
    lengths count). ``batch_size``: every batch holds that many indices (the epoch's last may
    hold fewer). ``max_tokens``: a batch holds at most as many as keep its padded size,
    ``len(batch) * max(lengths of batch)``, within ``max_tokens`` (a length of 0 counts as 1).
    Both: whichever limit comes first. A sample longer than ``max_tokens`` is an error here.

    Buckets: bucket ``k`` holds lengths in ``(boundaries[k-1], boundaries[k]]``, the last one
    everything longer. ``boundaries=None`` chooses them from the lengths: geometric edges, so
    that a bucket's longest length is at most 10% above its shortest (one bucket per length
    where lengths are too short for that), merged upward wherever a bucket holds fewer samples
    than one full batch of its longest length (a top bucket too small joins the one below).

    Batches: indices sorted by bucket (within a bucket in a random order of ``(seed, epoch)``,
    or by index with ``shuffle=False``) are cut at points fixed at construction: a batch ending
    in bucket ``k`` holds at most what the limits allow for bucket ``k``'s longest length, and a
    bucket's leftover joins the next one's first batch. So every epoch has the same number of
    batches (``len()`` never changes, which an exact resume relies on), only the epoch's last
    batch and a few at bucket changes are short, and budgets hold. Then the batch order is
    shuffled (``shuffle=True``). ``drop_last=True`` drops the epoch's last batch when it holds
    fewer indices than its bucket allows.

    Ranks: the epoch's global batch list is a function of ``(seed, epoch, lengths, options)``
    alone; rank ``r`` of ``world_size`` takes batches ``r, r + world_size, ...``, and every
    rank takes the same number (ranks training with DDP deadlock otherwise). When the count is
    not a multiple of ``world_size``: ``drop_last=True`` drops the remainder; otherwise, with
    ``max_tokens``, the largest batches are halved until it is (no index repeats, budgets
    hold), and with ``batch_size`` alone (whose batches keep their size) batches from the start
    of the shuffled list are repeated, the fewest that equalise.

    ``seed``, ``world_size``/``rank`` and epochs work as in :class:`MapSampler`. ``batch_size``
    is None with ``max_tokens`` alone (as PyTorch's loader has it for batch samplers).
    """

    # The batches are fresh lists of Python ints >= 0: sampler.yields_valid_indices trusts this
    # exact class (it reads the class's own attribute, so a subclass is not trusted).
    _fresh_int_batches = True
    # A state of other lengths or options is refused too, naming the field (MapSampler.load_state_dict).
    _STATE_CHECKS = ("sampler", "max_tokens", "shuffle", "lengths", "boundaries", *MapSampler._STATE_CHECKS[1:])
    _STATE_HINTS = {**MapSampler._STATE_HINTS, "lengths": "the same lengths"}
    # The batch size cuts the global batches, the units a resume on another world shares out.
    _WORLD_FIELDS = ("world_size", "rank")

    def __init__(
        self,
        dataset: Sized,
        lengths: Any,
        *,
        batch_size: int | None = None,
        max_tokens: int | None = None,
        boundaries: Any = None,
        shuffle: bool = True,
        seed: int | None = None,
        drop_last: bool = False,
        world_size: int | None = None,
        rank: int | None = None,
    ) -> None:
        if batch_size is None and max_tokens is None:
            raise ArgumentValueError(
                "BucketSampler needs `batch_size` (indices per batch), `max_tokens` (a budget on "
                "len(batch) * its longest length), or both; got neither."
            )
        if batch_size is not None:
            batch_size = check_positive_int("batch_size", batch_size)
        if max_tokens is not None:
            max_tokens = check_positive_int("max_tokens", max_tokens)
        super().__init__(dataset, batch_size or 1, drop_last, None, world_size, rank, seed)
        # None with max_tokens alone: no fixed count (MapSampler's is an int).
        self.batch_size = batch_size  # type: ignore[assignment]
        self.max_tokens = max_tokens
        self.shuffle = check_bool("shuffle", shuffle)
        self.lengths = plan.lengths_array(lengths, self.num_samples)
        plan.check_fits(self.lengths, max_tokens)
        self.boundaries = (
            plan.default_edges(self.lengths, batch_size, max_tokens)
            if boundaries is None
            else plan.check_boundaries(boundaries)
        )
        buckets = len(self.boundaries) + 1
        bucket = np.searchsorted(self.boundaries, self.lengths, side="left")
        # 16-bit bucket ids sort by radix: each epoch's stable sort is 4x faster at 1M samples.
        self._bucket = bucket.astype(np.uint16) if buckets <= 1 << 16 else bucket
        sizes = np.bincount(self._bucket, minlength=buckets)
        longest = np.zeros(buckets, dtype=np.int64)
        np.maximum.at(longest, self._bucket, self.lengths)
        caps = plan.capacity(longest, batch_size, max_tokens)
        self._bounds = plan.cut_points(sizes, caps)
        last = int(np.flatnonzero(sizes)[-1])  # the last bucket in use
        if self.drop_last and self._bounds[-1] - self._bounds[-2] < caps[last]:
            self._bounds = self._bounds[:-1]  # its short last batch, dropped every epoch
        self._boundaries_digest = digest_array(self.boundaries)
        self._lengths_digest = digest_array(self.lengths)

    def global_batches(self, epoch: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """All ranks' batches of ``epoch`` (default: the next one) before sharing them out:
        ``(order, starts, stops)``, batch ``i`` being ``order[starts[i]:stops[i]]``."""
        epoch = self.epoch if epoch is None else epoch
        return plan.epoch_batches(self._bucket, self._bounds, self._rng(epoch) if self.shuffle else None)

    def _plan(self, start: int) -> tuple[np.ndarray, np.ndarray]:
        """This rank's batches of the current epoch from batch ``start`` on, as one array and
        offsets into it; advances ``epoch`` by one."""
        order, starts, stops = self.global_batches()
        split = self.max_tokens is not None
        starts, stops = plan.left_batches(starts, stops, self._pending(), self.drop_last, split)
        self.epoch += 1
        starts, stops = plan.rank_share(starts, stops, self.world_size, self.rank, self.drop_last, split)
        return plan.flatten(order, starts[start:], stops[start:])

    def _units_per_batch_of(self, state: dict[str, Any]) -> int:
        return 1  # the global list's units are whole batches

    def _units_left(self) -> int:
        """Global batches the current epoch shares out: all, or what a resume left."""
        if not self._pending():
            return len(self._bounds) - 1
        if self._left_count is None or self._left_count[0] != self.epoch:
            _, starts, stops = self.global_batches()
            left = plan.left_batches(starts, stops, self._pending(), self.drop_last, self.max_tokens is not None)
            self._left_count = (self.epoch, len(left[0]))
        return self._left_count[1]

    def batch(self, start: int = 0) -> Iterator[list[int]]:
        """Return an iterator over this epoch's batches, from batch ``start`` on (the ones
        before it are never made), and advance ``epoch`` by one."""
        return split_at(*self._plan(start))

    def index_arrays(self, start: int = 0) -> Iterator[np.ndarray]:
        """:meth:`batch` as int64 arrays (views of one array), for the loader."""
        flat, offsets = self._plan(start)
        return (flat[offsets[i] : offsets[i + 1]] for i in range(len(offsets) - 1))

    def __len__(self) -> int:
        batches = self._units_left()
        if self.drop_last:
            return batches // self.world_size
        return -(-batches // self.world_size)

    def state_dict(self) -> dict[str, Any]:
        """:meth:`MapSampler.state_dict` and what else fixes the batches: ``max_tokens``,
        ``shuffle`` and digests of the lengths and of the bucket edges."""
        state = super().state_dict()
        state.update(
            max_tokens=self.max_tokens,
            shuffle=self.shuffle,
            lengths=self._lengths_digest,
            boundaries=self._boundaries_digest,
        )
        return state

