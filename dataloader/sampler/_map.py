"""The samplers of a map dataset: one global order per epoch, strided over ranks."""

from __future__ import annotations

import copy
from typing import Any, Iterator, Sequence, Sized

import numpy as np

from .._index_batches import stop as _stop, to_lists as _split
from .._reshard import Handed, Reshard, left_after, per_rank
from .._sampler_checks import check_indices as _check_indices, check_weights as _check_weights, dataset_len as _dataset_len
from .._validate import check_bool, check_non_negative_int, check_optional_seed, check_positive_int
from .._world import rank_positions, resolve_world
from ..errors import ArgumentValueError
from ..rng import draw_seed
from ._base import Sampler


class MapSampler(Sampler):
    """Base of the samplers for map-style datasets (anything with ``len()``).

    Subclasses override :meth:`sample` (all indices of the current epoch, before sharding) and
    may override :meth:`scatter` (this rank's share of them).

    Distributed sharding: ``world_size``/``rank`` come from the arguments, else from the
    ``WORLD_SIZE``/``RANK`` environment variables (read here, at construction), else 1 and 0.
    Every rank gets ``ceil(total / world_size)`` indices, so every rank yields the same number of
    batches: the epoch's index list is padded by wrap-around (repeating from its start, several
    times if ``total < world_size``) to ``per_rank * world_size``, and rank ``r`` takes
    ``indices[r::world_size]``. When ``world_size`` divides ``total`` the shards are disjoint and
    cover every index.

    Length: ``len(dataset)`` is read at construction (a sampler the loader builds from its
    ``batch_size``/``shuffle``/``drop_last``, or its default one, re-reads it at each epoch).

    Epochs: each ``iter()`` uses the current ``epoch`` and then advances it by one;
    :meth:`set_epoch` chooses the next one. ``seed=None`` draws a random seed (kept in ``seed``)
    when ``world_size == 1`` and uses 0 otherwise, so that all ranks agree on the order.
    """

    def __init__(
        self,
        dataset: Sized,
        batch_size: int = 1,
        drop_last: bool = False,
        num_samples: int | None = None,
        world_size: int | None = None,
        rank: int | None = None,
        seed: int | None = None,
    ) -> None:
        size = _dataset_len(dataset)
        self.dataset = dataset
        self.batch_size = check_positive_int("batch_size", batch_size)
        self.drop_last = check_bool("drop_last", drop_last)
        if num_samples is not None:
            num_samples = check_positive_int("num_samples", num_samples)
        self.num_samples: int = size if num_samples is None else num_samples  # before sharding
        self.world_size, self.rank = resolve_world(world_size, rank)
        seed = check_optional_seed("seed", seed)
        self._seed_drawn = seed is None  # a resumed run takes the saved seed in its place
        self.seed: int = _default_seed(self.world_size) if seed is None else seed
        self.samples_per_rank = -(-self.num_samples // self.world_size)
        self.epoch = 0
        # A resume on another number of ranks: what epoch `_reshard_epoch` has left (module _reshard).
        self._reshards: tuple[Reshard, ...] = ()
        self._reshard_epoch = -1
        self._left_count: tuple[int, int] | None = None  # (epoch, units left): len() asks often

    _follows = False  # set by follow_dataset(): the length is re-read from the dataset
    # What a state must agree on to be loaded, in the order the check names the first that
    # differs (a subclass adds its own), and what the error adds for some of them.
    _STATE_CHECKS: tuple[str, ...] = ("sampler", "world_size", "rank", "num_samples", "batch_size", "drop_last", "seed")
    _STATE_HINTS = {"world_size": "the same WORLD_SIZE and RANK", "rank": "the same WORLD_SIZE and RANK"}
    # What may differ when a state of another world is reshaped to this one (reshard_from).
    _WORLD_FIELDS: tuple[str, ...] = ("world_size", "rank", "batch_size")

    def _follow(self) -> None:
        """A sampler the loader built (:func:`follow_dataset`) takes the dataset's length now."""
        if self._follows:
            self.num_samples = _dataset_len(self.dataset)
            self.samples_per_rank = -(-self.num_samples // self.world_size)

    def sample(self) -> Sequence[int] | np.ndarray:
        """Return every index of the current epoch, before sharding (override point)."""
        raise NotImplementedError(f"{type(self).__name__} must override `sample()`.")

    def scatter(self, indices: np.ndarray) -> np.ndarray:
        """Return this rank's share of ``indices``, padded by wrap-around (see the class doc)."""
        if self.world_size == 1 or len(indices) == 0:
            return indices
        per_rank = -(-len(indices) // self.world_size)
        share: np.ndarray = np.asarray(indices)[rank_positions(self.rank, self.world_size, per_rank, len(indices))]
        return share

    def batch(self, start: int = 0) -> Iterator[list[int]]:
        """Return an iterator over this epoch's batches, from batch ``start`` on (the ones
        before it are never made), and advance ``epoch`` by one."""
        return _split(self._order(start), self.batch_size, self.drop_last)

    def index_arrays(self, start: int = 0) -> Iterator[np.ndarray]:
        """:meth:`batch` as int64 arrays (views of the epoch's order), for the loader: they
        travel to workers as bytes, and become Python ints only where the dataset is read."""
        indices = self._order(start)
        size = self.batch_size
        return (indices[first : first + size] for first in range(0, _stop(indices, size, self.drop_last), size))

    def _order(self, start: int) -> np.ndarray:
        """This epoch's indices from batch ``start`` on; advances ``epoch`` by one."""
        self._follow()
        indices = self.scatter(self._left(np.asarray(self.sample(), dtype=np.int64)))
        self.epoch += 1
        return indices[start * self.batch_size :]

    def _pending(self) -> tuple[Reshard, ...]:
        """The world changes the current epoch was resumed through (none: a plain epoch)."""
        return self._reshards if self._reshard_epoch == self.epoch else ()

    def _left(self, units: np.ndarray) -> np.ndarray:
        """``units`` (the epoch's global list) less what the ranks of each earlier world handed
        out (:mod:`._reshard`), in order; all of them in a plain epoch."""
        for reshard in self._pending():
            units = units[left_after(len(units), reshard)]
        return units

    def _units_left(self) -> int:
        """How many units the current epoch shares out: all, or what a resume left."""
        if not self._pending():
            return self.num_samples
        if self._left_count is None or self._left_count[0] != self.epoch:
            count = self.num_samples  # what is left depends on the counts alone, not on the order
            for reshard in self._pending():
                count = len(left_after(count, reshard))
            self._left_count = (self.epoch, count)
        return self._left_count[1]

    def reshard_from(self, states: list[dict[str, Any]], handed: tuple[Handed, ...]) -> None:
        """Continue an epoch that ranks of another world (or batch size) began: ``states`` are
        their samplers' states as their epoch began (one standing for all, or one per rank in
        rank order) and ``handed`` what each rank handed out. Every unit of the epoch none of
        them handed out comes once, shared out over this world as a fresh epoch would be."""
        first = states[0]
        for state in states:
            self._check_state(state, skip=self._WORLD_FIELDS)
            if (state.get("epoch"), _ongoing(state)) != (first.get("epoch"), _ongoing(first)):
                raise ArgumentValueError(
                    "the ranks' states are of different epochs, or of epochs resumed otherwise (sampler "
                    f"epoch {first.get('epoch')!r} and {state.get('epoch')!r}): pass the states every "
                    "rank took at the same step."
                )
        world = check_positive_int("world_size", first["world_size"])
        if len(states) not in (1, world) or len(handed) != len(states):
            raise ArgumentValueError(f"a world of {world} ranks needs 1 or {world} states; got {len(states)}.")
        per_batch = self._units_per_batch_of(first)
        earlier = tuple(Reshard.from_plain(plain) for plain in _ongoing(first))
        self.seed = int(first["seed"])
        self.epoch = check_non_negative_int("epoch", first["epoch"])
        self._reshards, self._reshard_epoch = (*earlier, Reshard(world, per_batch, handed)), self.epoch
        self._left_count = None

    def _length_of(self, state: dict[str, Any]) -> int:
        """``len()`` of the sampler that saved ``state`` (of any world or batch size), for the
        epoch the state is at (what a resume left of it, if one reshaped it)."""
        twin = copy.copy(self)
        twin.world_size, twin.rank, twin.batch_size = int(state["world_size"]), int(state["rank"]), state["batch_size"]
        twin.load_state_dict(state)
        return len(twin)

    def _units_per_batch_of(self, state: dict[str, Any]) -> int:
        """Units of the global list in one batch of the sampler that saved ``state``: indices
        here (a BucketSampler's units are whole batches)."""
        return check_positive_int("batch_size", state["batch_size"])

    def state_dict(self) -> dict[str, Any]:
        """The next epoch and what fixes its order, as plain values (for a loader's state)."""
        self._follow()
        return {
            "sampler": type(self).__name__,
            "epoch": self.epoch,
            "seed": self.seed,
            "num_samples": self.num_samples,
            "batch_size": self.batch_size,
            "drop_last": self.drop_last,
            "world_size": self.world_size,
            "rank": self.rank,
            **self._reshards_state(),
        }

    def _reshards_state(self) -> dict[str, Any]:
        """The world changes of the epoch in progress or the next one (an ``Infinite`` takes its
        state mid-pass, after the epoch advanced), as plain values; nothing otherwise."""
        if not self._reshards or self._reshard_epoch < self.epoch - 1:
            return {}
        return {"reshards": [r.to_plain() for r in self._reshards], "reshard_epoch": self._reshard_epoch}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state_dict`'s ``state``; anything else that differs is an error
        naming it. A seed drawn at random (``seed=None``) gives way to the saved one. A state of
        another world or batch size is the loader's to reshape (:meth:`reshard_from`)."""
        self._check_state(state)
        self.seed = int(state["seed"])
        self.epoch = check_non_negative_int("epoch", state["epoch"])
        self._reshards = tuple(Reshard.from_plain(plain) for plain in state.get("reshards") or ())
        self._reshard_epoch = check_non_negative_int("reshard_epoch", state.get("reshard_epoch", self.epoch))
        self._left_count = None

    def _check_state(self, state: dict[str, Any], skip: tuple[str, ...] = ()) -> None:
        """Refuse a state that differs from this sampler's in a field other than ``skip``."""
        mine = self.state_dict()
        for name in self._STATE_CHECKS:
            if name in skip or (name == "seed" and getattr(self, "_seed_drawn", False)):
                continue
            if state.get(name) != mine[name]:
                raise ArgumentValueError(
                    f"the state was saved by a sampler with {name}={state.get(name)!r}; this one has "
                    f"{name}={mine[name]!r}. Resume with a sampler built as the one that saved it"
                    + (f" ({self._STATE_HINTS[name]})." if name in self._STATE_HINTS else ".")
                )

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration produce epoch ``epoch`` (a function of seed and epoch only)."""
        self.epoch = check_non_negative_int("epoch", epoch)

    def __iter__(self) -> Iterator[list[int]]:
        return self.batch()

    def __len__(self) -> int:
        self._follow()
        share = per_rank(self._units_left(), self.world_size)
        if self.drop_last:
            return share // self.batch_size
        return -(-share // self.batch_size)

    def _rng(self, epoch: int | None = None) -> np.random.Generator:
        """The generator of ``epoch`` (default: the current one): a pure function of (seed, epoch)."""
        return np.random.default_rng([self.seed, self.epoch if epoch is None else epoch])


class SequentialSampler(MapSampler):
    """Indices in order: ``0 .. len(dataset) - 1``, or ``indices`` as given."""

    _fresh_int_batches = True  # its batches are fresh lists of checked ints (yields_valid_indices)

    def __init__(
        self,
        dataset: Sized,
        batch_size: int = 1,
        drop_last: bool = False,
        indices: Sequence[int] | np.ndarray | None = None,
        world_size: int | None = None,
        rank: int | None = None,
    ) -> None:
        self.indices = _check_indices(indices, dataset)
        total = None if self.indices is None else len(self.indices)
        super().__init__(dataset, batch_size, drop_last, total, world_size, rank, seed=0)

    def sample(self) -> np.ndarray:
        """Return the indices in their given order."""
        return np.arange(self.num_samples) if self.indices is None else self.indices


class RandomSampler(MapSampler):
    """A new permutation of the dataset (or of ``indices``) each epoch, fixed by (seed, epoch)."""

    _fresh_int_batches = True  # its batches are fresh lists of checked ints (yields_valid_indices)

    def __init__(
        self,
        dataset: Sized,
        batch_size: int = 1,
        drop_last: bool = False,
        indices: Sequence[int] | np.ndarray | None = None,
        world_size: int | None = None,
        rank: int | None = None,
        seed: int | None = None,
    ) -> None:
        self.indices = _check_indices(indices, dataset)
        total = None if self.indices is None else len(self.indices)
        super().__init__(dataset, batch_size, drop_last, total, world_size, rank, seed)

    def sample(self) -> np.ndarray:
        """Return the permutation of the current epoch."""
        return self._rng().permutation(self.num_samples if self.indices is None else self.indices)


class ReplacementSampler(MapSampler):
    """``num_samples`` indices drawn with replacement, uniformly or in proportion to ``weights``.

    ``weights`` (one per dataset item, need not sum to 1) must be finite and non-negative with a
    positive sum; items of weight 0 are never drawn. ``num_samples`` (default ``len(dataset)``)
    counts the draws of all ranks together, before sharding.
    """

    _fresh_int_batches = True  # its batches are fresh lists of checked ints (yields_valid_indices)

    def __init__(
        self,
        dataset: Sized,
        batch_size: int = 1,
        drop_last: bool = False,
        num_samples: int | None = None,
        weights: Sequence[float] | np.ndarray | None = None,
        world_size: int | None = None,
        rank: int | None = None,
        seed: int | None = None,
    ) -> None:
        super().__init__(dataset, batch_size, drop_last, num_samples, world_size, rank, seed)
        self._size = len(dataset)
        self.weights = None if weights is None else _check_weights(weights, self._size)
        self._p = None if self.weights is None else self.weights / self.weights.sum()

    def sample(self) -> np.ndarray:
        """Return the draws of the current epoch."""
        rng = self._rng()
        if self._p is None:
            return rng.integers(0, self._size, self.num_samples)
        return rng.choice(self._size, self.num_samples, replace=True, p=self._p)


def _ongoing(state: dict[str, Any]) -> list[Any]:
    """The world changes a sampler's state records for its own epoch (an earlier epoch's, which
    a state taken as the next one begins still carries, no longer count)."""
    return list(state.get("reshards") or ()) if state.get("reshard_epoch") == state.get("epoch") else []


def follow_dataset(sampler: MapSampler) -> MapSampler:
    """``sampler``, which the loader built over its whole dataset, made to re-read
    ``len(dataset)`` as each epoch begins, in ``len()`` and in ``state_dict()``, as PyTorch's
    loader does: a dataset that grew or shrank between epochs is read whole. A sampler the user
    built keeps the length it was built with (its documented contract)."""
    sampler._follows = True
    return sampler


def _default_seed(world_size: int) -> int:
    """A seed drawn for one process (:func:`~dataloader.rng.draw_seed`: ``torch.manual_seed`` or
    ``np.random.seed`` fix it); 0 when ranks must agree without an explicit seed."""
    return draw_seed() if world_size == 1 else 0
