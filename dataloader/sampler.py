"""Batch samplers: iterating one yields lists of dataset indices, one list per batch.

MegEngine's names and semantics, with its bugs fixed (``len()`` ignored ``indices``; a dataset
smaller than ``batch_size`` crashed with ``drop_last=True``; MegEngine 1.x's ``ReplacementSampler``
with weights drew counts from a multinomial, not indices). An epoch's order is a pure function of ``(seed, epoch)``, so any process can rebuild
it. Each epoch is one NumPy array, turned into lists in large chunks, never element by element.
"""

from __future__ import annotations

import inspect
import itertools
import os
import sys
from abc import ABC, abstractmethod
from typing import Any, Iterator, Sequence, Sized

import numpy as np

from ._validate import (
    check_bool,
    check_len,
    check_non_negative_int,
    check_optional_seed,
    check_positive_int,
)
from .errors import ArgumentTypeError, ArgumentValueError
from .rng import draw_seed

__all__ = [
    "Infinite",
    "MapSampler",
    "RandomSampler",
    "ReplacementSampler",
    "Sampler",
    "SequentialSampler",
    "StreamSampler",
]

# Indices turned into Python ints per `.tolist()` call: large enough that NumPy does the work,
# small enough that the ints are still in the CPU's cache when the dataset reads them (1-3 us
# a batch of 256 faster than 65,536 at once, measured on Python scalars).
_CHUNK = 1 << 12


class Sampler(ABC):
    """A batch sampler: iterating it yields lists of indices; ``len()`` counts the batches."""

    @abstractmethod
    def __iter__(self) -> Iterator[list[int]]: ...

    @abstractmethod
    def __len__(self) -> int: ...


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

    _follows = False  # set by follow_dataset(): the length is re-read from the dataset
    # What a state must agree on to be loaded, in the order the check names the first that
    # differs (a subclass adds its own), and what the error adds for some of them.
    _STATE_CHECKS: tuple[str, ...] = ("sampler", "world_size", "rank", "num_samples", "batch_size", "drop_last", "seed")
    _STATE_HINTS = {"world_size": "the same WORLD_SIZE and RANK", "rank": "the same WORLD_SIZE and RANK"}

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
        indices = self.scatter(np.asarray(self.sample(), dtype=np.int64))
        self.epoch += 1
        return indices[start * self.batch_size :]

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
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state_dict`'s ``state``; anything else that differs is an error
        naming it. A seed drawn at random (``seed=None``) gives way to the saved one."""
        mine = self.state_dict()
        for name in self._STATE_CHECKS:
            if name == "seed" and getattr(self, "_seed_drawn", False):
                continue
            if state.get(name) != mine[name]:
                raise ArgumentValueError(
                    f"the state was saved by a sampler with {name}={state.get(name)!r}; this one has "
                    f"{name}={mine[name]!r}. Resume with a sampler built as the one that saved it"
                    + (f" ({self._STATE_HINTS[name]})." if name in self._STATE_HINTS else ".")
                )
        self.seed = int(state["seed"])
        self.epoch = check_non_negative_int("epoch", state["epoch"])

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration produce epoch ``epoch`` (a function of seed and epoch only)."""
        self.epoch = check_non_negative_int("epoch", epoch)

    def __iter__(self) -> Iterator[list[int]]:
        return self.batch()

    def __len__(self) -> int:
        self._follow()
        if self.drop_last:
            return self.samples_per_rank // self.batch_size
        return -(-self.samples_per_rank // self.batch_size)

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


class Infinite(Sampler):
    """Wraps a sampler and restarts it whenever it ends, forever.

    Attributes of the wrapped sampler (``batch_size``, ``set_epoch``, ...) are reachable through
    this object. It pickles without its live iterator: a copy resumes at the same batch (for
    samplers with ``set_epoch``) because it keeps only the pass's epoch and the batches consumed.
    """

    def __init__(self, sampler: Sampler) -> None:
        if not hasattr(type(sampler), "__iter__"):
            raise ArgumentTypeError(f"`sampler` must be a Sampler; got {type(sampler).__name__}.")
        if check_len("sampler", sampler) == 0:  # None: no length (a stream)
            raise ArgumentValueError(
                f"`sampler` must yield at least one batch to repeat; got a "
                f"{type(sampler).__name__} with len() == 0. Lower `batch_size` or set "
                "`drop_last=False`."
            )
        self.sampler = sampler
        self._pass_epoch: int | None = None  # epoch of the pass in progress
        self._consumed = 0  # batches handed out from that pass
        self._iter: Iterator[list[int]] | None = None

    def __iter__(self) -> Infinite:
        return self

    def __next__(self) -> list[int]:
        if self._iter is None:  # first call, or first call after unpickling
            self._iter = self._open(self._consumed)
        for _ in range(2):
            try:
                batch = next(self._iter)
            except StopIteration:
                self._iter = self._open(0)
                continue
            self._consumed += 1
            return batch
        raise RuntimeError(f"the wrapped {type(self.sampler).__name__} yielded no batches.")

    def __len__(self) -> int:
        return sys.maxsize

    def __getattr__(self, name: str) -> Any:
        # Only called when normal lookup fails. Reading `sampler` from __dict__ (not via
        # self.sampler) avoids endless recursion while pickle builds an empty instance.
        sampler = self.__dict__.get("sampler")
        if sampler is None or name.startswith("__"):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(sampler, name)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_iter"] = None  # a live generator cannot be pickled; __next__ rebuilds it
        return state

    def state_dict(self) -> dict[str, Any]:
        """The pass in progress, the batches taken from it, and the wrapped sampler's state."""
        return {
            "pass_epoch": self._pass_epoch,
            "consumed": self._consumed,
            "sampler": sampler_state(self.sampler),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state_dict`'s ``state``: the next batch is the one after it."""
        if state.get("sampler") is not None:
            self.sampler.load_state_dict(state["sampler"])  # type: ignore[attr-defined]
        self._pass_epoch = state["pass_epoch"]
        self._consumed = check_non_negative_int("consumed", state["consumed"])
        self._iter = None

    def _open(self, skip: int) -> Iterator[list[int]]:
        """Start a pass of the wrapped sampler; ``skip`` > 0 resumes the recorded pass."""
        if skip and self._pass_epoch is not None:
            self.sampler.set_epoch(self._pass_epoch)  # type: ignore[attr-defined]  # a sampler with epochs
        self._pass_epoch = getattr(self.sampler, "epoch", None)
        self._consumed = skip
        return batches_from(self.sampler, skip)


class StreamSampler(Sampler):
    """The sampler of a stream dataset: only its ``batch_size`` and ``drop_last`` matter.

    ``drop_last=True`` drops the stream's last batch when it is short (each worker's, where each
    reads its own shard with ``parallel_stream=True``), as PyTorch does. Iterating yields
    ``list(range(batch_size))`` forever; ``len()`` raises ``TypeError``.
    """

    def __init__(self, batch_size: int = 1, drop_last: bool = False) -> None:
        self.batch_size = check_positive_int("batch_size", batch_size)
        self.drop_last = check_bool("drop_last", drop_last)

    def __iter__(self) -> StreamSampler:
        return self

    def __next__(self) -> list[int]:
        return list(range(self.batch_size))

    def __len__(self) -> int:
        raise TypeError("StreamSampler has no length: a stream's length is unknown.")


def follow_dataset(sampler: MapSampler) -> MapSampler:
    """``sampler``, which the loader built over its whole dataset, made to re-read
    ``len(dataset)`` as each epoch begins, in ``len()`` and in ``state_dict()``, as PyTorch's
    loader does: a dataset that grew or shrank between epochs is read whole. A sampler the user
    built keeps the length it was built with (its documented contract)."""
    sampler._follows = True
    return sampler


def rank_positions(rank: int, world_size: int, per_rank: int, count: int) -> np.ndarray:
    """Positions rank, rank + world_size, ... (``per_rank`` of them) of a list of ``count``
    items repeated cyclically: one rank's share alone, so the work does not grow with the world."""
    positions = rank + world_size * np.arange(per_rank, dtype=np.int64)
    return positions % count if count else positions


def yields_valid_indices(sampler: Any) -> bool:
    """Whether ``sampler`` is one of ours (or ``Infinite`` over one), whose batches are fresh
    lists of Python ints >= 0 (checked when it was built): the loader need not copy them, and
    takes a plain one's batches as int64 arrays (:meth:`MapSampler.index_arrays`), which it
    does not check for negative indices. A subclass may override ``sample()``: not trusted."""
    inner = sampler.sampler if type(sampler) is Infinite else sampler
    # Each such class says so in its own namespace: a subclass does not inherit the trust.
    return vars(type(inner)).get("_fresh_int_batches") is True


def batches_from(sampler: Any, start: int, arrays: bool = False) -> Iterator[Any]:
    """``iter(sampler)`` from batch ``start`` on: a :class:`MapSampler` whose ``__iter__`` is
    ``batch()`` never makes the batches before it (``batch(start)``, its own if it overrides
    it with a ``start`` parameter; an override without one, written before ``batch`` took it,
    is iterated as before); another sampler's are made and dropped. ``arrays``: a
    :class:`MapSampler`'s batches as int64 arrays (:meth:`MapSampler.index_arrays`), for a
    sampler :func:`yields_valid_indices` trusts; other samplers' stay lists."""
    kind = type(sampler)
    if isinstance(sampler, MapSampler) and kind.__iter__ is MapSampler.__iter__ and _takes_start(kind.batch):
        return sampler.index_arrays(start) if arrays else sampler.batch(start)
    it = iter(sampler)
    return itertools.islice(it, start, None) if start else it


def _takes_start(method: Any) -> bool:
    """Whether ``method`` (a ``batch`` override) takes a ``start`` argument."""
    if method is MapSampler.batch:
        return True
    try:
        return "start" in inspect.signature(method).parameters
    except (TypeError, ValueError):  # no signature to read: call it as __iter__ does
        return False


def sampler_state(sampler: Any) -> Any:
    """``sampler.state_dict()``, or None for a sampler without one."""
    state_dict = getattr(sampler, "state_dict", None)
    return None if state_dict is None else state_dict()


def _stop(indices: np.ndarray, batch_size: int, drop_last: bool) -> int:
    """Where the epoch's batches end: before a last short batch if ``drop_last``."""
    return len(indices) - len(indices) % batch_size if drop_last else len(indices)


def _split(indices: np.ndarray, batch_size: int, drop_last: bool) -> Iterator[list[int]]:
    """Yield ``indices`` as lists of ``batch_size`` Python ints, one ``tolist()`` per chunk."""
    stop = _stop(indices, batch_size, drop_last)
    chunk = batch_size * max(1, _CHUNK // batch_size)
    for start in range(0, stop, chunk):
        flat = indices[start : min(start + chunk, stop)].tolist()
        for i in range(0, len(flat), batch_size):
            yield flat[i : i + batch_size]


def split_at(flat: np.ndarray, offsets: np.ndarray) -> Iterator[list[int]]:
    """Batches of any sizes (batch ``i`` is ``flat[offsets[i]:offsets[i + 1]]``) as lists of Python
    ints, one ``tolist()`` per chunk of about ``_CHUNK``: :class:`~dataloader.BucketSampler`'s."""
    count = len(offsets) - 1
    first = 0
    while first < count:
        last = int(np.searchsorted(offsets, offsets[first] + _CHUNK, side="right")) - 1
        last = min(max(last, first + 1), count)
        base = int(offsets[first])
        ints = flat[base : int(offsets[last])].tolist()
        edges = (offsets[first : last + 1] - base).tolist()
        for i in range(last - first):
            yield ints[edges[i] : edges[i + 1]]
        first = last


def _dataset_len(dataset: Any) -> int:
    """Return ``len(dataset)``, or raise if it has none, an invalid one, or is empty."""
    size = check_len("dataset", dataset)
    if size is None:
        raise ArgumentTypeError(
            f"`dataset` must have a length (a map-style Dataset); got {type(dataset).__name__}. "
            "A StreamDataset goes with StreamSampler."
        )
    if size == 0:
        raise ArgumentValueError("`dataset` must not be empty; got a dataset of length 0.")
    return size


def _check_indices(indices: Any, dataset: Any) -> np.ndarray | None:
    """Return ``indices`` as a non-empty 1-D int64 array within the dataset, or None."""
    size = _dataset_len(dataset)
    if indices is None:
        return None
    arr = np.asarray(indices)
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise ArgumentTypeError(
            f"`indices` must be a 1-D sequence of integers; got {type(indices).__name__} "
            f"of shape {arr.shape} and dtype {arr.dtype}."
        )
    if arr.size == 0:
        raise ArgumentValueError("`indices` must not be empty; got an empty sequence.")
    bad = arr[(arr < 0) | (arr >= size)]
    if bad.size:
        raise ArgumentValueError(
            f"`indices` must lie in [0, {size}) (the dataset's length); got {bad[0]}."
        )
    return arr.astype(np.int64)


def _check_weights(weights: Any, size: int) -> np.ndarray:
    """Return ``weights`` as a float64 array of ``size`` finite non-negative numbers."""
    try:
        arr = np.asarray(weights, dtype=np.float64)
    except (TypeError, ValueError):
        raise ArgumentTypeError(
            f"`weights` must be a sequence of numbers; got {type(weights).__name__}."
        ) from None
    if arr.shape != (size,):
        raise ArgumentValueError(
            f"`weights` must have one entry per dataset item ({size}); got shape {arr.shape}."
        )
    bad = arr[~np.isfinite(arr) | (arr < 0)]
    if bad.size:
        raise ArgumentValueError(f"`weights` must be finite and non-negative; got {bad[0]}.")
    with np.errstate(over="ignore"):  # an overflowing sum is reported below, not warned about
        total = arr.sum()
    if not (np.isfinite(total) and total > 0):
        raise ArgumentValueError(f"`weights` must have a finite positive sum; got {total}.")
    return arr


# More ranks than any job runs: a larger world size is a mistake (a mangled variable), and
# refusing it keeps every plan over ranks small.
MAX_WORLD_SIZE = 2**24


def resolve_world(world_size: Any, rank: Any) -> tuple[int, int]:
    """Return (world_size, rank) from the arguments, else the environment, else (1, 0).

    Every reader that shards by rank uses it (the samplers, ``dataloader.columnar``'s streams),
    so all of them read the same arguments and variables the same way. A world of more than
    one process needs a rank: without one every process would read rank 0's shard.
    """
    if world_size is None and rank is not None:
        raise ArgumentValueError(
            f"`rank` was given ({rank!r}) without `world_size`; pass both, or neither to read "
            "WORLD_SIZE and RANK from the environment."
        )
    ws_name, rank_name = "world_size", "rank"
    if world_size is None:
        ws_name, world_size = "WORLD_SIZE", _env_int("WORLD_SIZE", 1)
    if rank is None:
        rank_name, rank = "RANK", _env_int("RANK", None)
    world_size = check_positive_int(ws_name, world_size)
    if world_size > MAX_WORLD_SIZE:
        raise ArgumentValueError(
            f"`{ws_name}` is {world_size}, more processes than a job runs (at most {MAX_WORLD_SIZE} "
            "here); check where it is set."
        )
    if rank is None:
        if world_size > 1:
            raise ArgumentValueError(
                f"`{ws_name}` is {world_size} but no rank is given: neither `rank` nor the RANK "
                "environment variable is set, and reading rank 0's shard in every process would "
                "repeat the same rows in each. Pass rank=..., or set RANK (torchrun sets both "
                "WORLD_SIZE and RANK; other launchers: export RANK from their own variable, such "
                "as SLURM_PROCID)."
            )
        rank = 0
    rank = check_non_negative_int(rank_name, rank)
    if rank >= world_size:
        raise ArgumentValueError(
            f"`{rank_name}` must be in [0, `{ws_name}`) = [0, {world_size}); got {rank}."
            + (" WORLD_SIZE is not set, so the world is this one process." if ws_name == "WORLD_SIZE"
               and "WORLD_SIZE" not in os.environ else "")
        )
    return world_size, rank


def _env_int(var: str, default: int | None) -> int | None:
    """Return the integer in environment variable ``var``, or ``default`` if unset or empty."""
    raw = os.environ.get(var, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ArgumentValueError(
            f"`{var}` (environment variable) must be an integer; got {raw!r}."
        ) from None


def _default_seed(world_size: int) -> int:
    """A seed drawn for one process (:func:`~dataloader.rng.draw_seed`: ``torch.manual_seed`` or
    ``np.random.seed`` fix it); 0 when ranks must agree without an explicit seed."""
    return draw_seed() if world_size == 1 else 0
