"""The drop-in for PyTorch users: ``torch.utils.data.DataLoader``'s signature over our engine.

A PyTorch script changes one import::

    from dataloader.torch import DataLoader    # was: from torch.utils.data import DataLoader

and runs: the same arguments, defaults and argument errors, tensors out, the same batches in
the same order (a shuffled order is drawn by torch's own ``RandomSampler`` from the same
generator), and the same draws from torch's random generator, so ``torch.manual_seed`` fixes
a run as it did. Behind it is :class:`dataloader.DataLoader`; its keyword options that PyTorch
lacks (``seed``, ``on_error``, ``hooks``, ``device``, ...) pass through. See
docs/migrating-from-pytorch.md for what still differs.
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing
import warnings
from dataclasses import replace
from types import GenericAlias
from typing import Any, Callable, Iterator

from .errors import ArgumentTypeError, ArgumentValueError
from .loader import DataLoader as _Engine
from .sampler import SequentialSampler as _OurSequentialSampler
from .sampler._map import follow_dataset
from .worker import get_worker_info

try:
    import torch
    from torch.utils.data import BatchSampler, IterableDataset, IterDataPipe, MapDataPipe, RandomSampler
    from torch.utils.data import SequentialSampler, default_collate, default_convert
    from torch.utils.data.graph_settings import apply_random_seed, apply_sharding, apply_shuffle_settings
except ImportError as error:
    raise ImportError(
        "dataloader.torch is the drop-in for torch.utils.data.DataLoader and needs PyTorch, "
        "which is not installed: pip install torch (or use dataloader.DataLoader, which does not)."
    ) from error

__all__ = ["DataLoader"]


class DataLoader(_Engine):
    """``torch.utils.data.DataLoader``'s arguments, our engine's batches (as tensors).

    The positional and keyword arguments, their defaults and the errors for conflicting ones
    are PyTorch's. ``shuffle=True`` without a ``sampler`` draws its order with torch's
    ``RandomSampler`` from ``generator`` (or torch's default generator), so the batches are
    PyTorch's; so are those of a ``sampler`` with ``batch_size``, and of a ``batch_sampler``.
    Each ``iter(loader)`` draws one int64 from that generator, as PyTorch's does (once in all
    with ``persistent_workers``); the first seeds the batches' random state (unless ``seed=``
    is given), which is then a function of (seed, epoch, batch index), not of the worker.

    A ``torch.utils.data.IterableDataset`` is copied into each worker and read there, sharded
    by your ``__iter__`` with ``torch.utils.data.get_worker_info()`` (``parallel_stream=True``);
    with ``num_workers=0`` it is read in this process; ``len(loader)`` comes from its
    ``__len__``, if it has one. Every other dataset is map-style, as PyTorch takes it.

    Workers are PyTorch's too: worker ``i`` of ``n`` makes batches ``i``, ``i + n``, ...
    (``dispatch="round_robin"``), and is seeded once as it starts, from the iterator's base
    seed plus ``i``, as PyTorch seeds ``random``, torch and NumPy (``seeding="worker"``);
    ``worker_init_fn`` may reseed, and what a dataset draws is then what it draws under
    PyTorch. ``num_workers`` above what the machine has room for is warned about, not refused
    (``too_many_workers="warn"``). ``extras`` are :class:`dataloader.DataLoader`'s keyword
    options that PyTorch lacks; pass ``seeding="batch"``, ``dispatch="least_busy"`` or
    ``too_many_workers="raise"`` for that loader's guarantees (random state that is the same
    for any ``num_workers``, batches to the least busy worker, the worker cap).
    """

    # DataLoader[list[torch.Tensor]] in annotations, as torch's loader is Generic.
    __class_getitem__: Any = classmethod(GenericAlias)
    # PyTorch keeps its persistent workers' iterator here (a private attribute its own tests
    # read); this loader keeps them in the engine, and loader.close() stops them.
    _iterator = None

    def __init__(
        self,
        dataset: Any,
        batch_size: int | None = 1,
        shuffle: bool | None = None,
        sampler: Any = None,
        batch_sampler: Any = None,
        num_workers: int = 0,
        collate_fn: Callable[[list[Any]], Any] | None = None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn: Callable[[int], None] | None = None,
        multiprocessing_context: Any = None,
        generator: Any = None,
        *,
        prefetch_factor: int | None = None,
        persistent_workers: bool = False,
        pin_memory_device: str = "",
        in_order: bool = True,
        **extras: Any,
    ) -> None:
        stream = isinstance(dataset, IterableDataset)
        has_workers = num_workers != 0  # an int, as PyTorch's is, or our "auto"
        # A DataPipe graph (torch's, deprecated there but still read): shuffled, seeded per epoch
        # and sharded per worker through torch's graph_settings, as PyTorch's loader does.
        self._datapipe = isinstance(dataset, IterDataPipe)
        _check_like_pytorch(stream, batch_size, shuffle, sampler, batch_sampler, drop_last, self._datapipe)
        if self._datapipe and shuffle is not None:
            dataset = apply_shuffle_settings(dataset, shuffle=shuffle)
        _check_workers_like_pytorch(num_workers, timeout, prefetch_factor, persistent_workers, multiprocessing_context)
        _check_extras(extras)
        for name, pytorchs in _PYTORCH_WORKERS.items():
            extras.setdefault(name, pytorchs)
        self.generator = generator
        # PyTorch's attribute: the function given, else its default (the batches are made by
        # this library's collator, which differs only in keeping a tuple a tuple).
        self.collate_fn = collate_fn or (
            default_convert if batch_size is None and batch_sampler is None else default_collate
        )
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.prefetch_factor = 2 if has_workers and prefetch_factor is None else prefetch_factor
        self.persistent_workers = persistent_workers
        self.in_order = in_order
        self._batch_size = batch_size if batch_sampler is None else None
        self._drop_last = drop_last if batch_sampler is None else False
        self._draws_left = 1 if persistent_workers and has_workers else None  # None: every iter
        self._seed_fixed = extras.get("seed") is not None
        pytorch_seeding = extras["seeding"] == "worker"
        # Each iterator's draw seeds its workers, as PyTorch's base seed does; with seed= (or
        # after a loaded state) each epoch's workers get a seed of their own from it instead.
        self._workers_follow_draws = pytorch_seeding and not self._seed_fixed
        self._stream_length: int | None = None  # len(dataset) of a stream, once len() was asked
        shortcuts: dict[str, Any] = {}  # a stream's StreamSampler, built by the engine
        engine_sampler = self._sampler = self._batch_sampler = None
        if stream:
            shortcuts = {"batch_size": batch_size or 1, "drop_last": drop_last}
        else:
            self._sampler = _index_sampler(dataset, shuffle, sampler, generator)
            engine_sampler = _batch_sampler(dataset, self._sampler, batch_size, drop_last, batch_sampler)
            if batch_size is not None or batch_sampler is not None:  # PyTorch's attribute: None unbatched
                self._batch_sampler = engine_sampler
        if batch_size is None:  # no batching: each sample as it is, converted, as PyTorch does
            collate_fn = _Unbatched(collate_fn or default_convert)
        # PyTorch's workers are processes on every Python, free-threaded too: so are these,
        # unless worker_type= says otherwise (the plain loader's default follows the GIL).
        extras.setdefault("worker_type", "process")
        process_workers = extras["worker_type"] == "process"
        self._worker_setup = _TorchWorkerInit(
            worker_init_fn, pytorch_seeding, isinstance(dataset, (IterDataPipe, MapDataPipe))
        )
        with _default_generator_untouched():  # PyTorch draws nothing when a loader is built
            super().__init__(
                dataset,
                engine_sampler,
                collate_fn=collate_fn,
                num_workers=num_workers,
                timeout=timeout,
                parallel_stream=stream and has_workers,
                prefetch_factor=prefetch_factor,
                # A DataPipe's workers start with each epoch, so each copy has that epoch's seed.
                persistent_workers=persistent_workers and not self._datapipe,
                multiprocessing_context=multiprocessing_context,
                in_order=in_order,
                worker_init_fn=self._worker_setup if process_workers and has_workers else worker_init_fn,
                pin_memory=pin_memory,
                **{"framework": "torch", **extras},
                **shortcuts,
            )

        self._initialized = True

    sampler = property(
        lambda self: self._sampler,
        doc="The index sampler, as PyTorch's loader has it (None for an IterableDataset).",
    )
    batch_sampler = property(
        lambda self: self._batch_sampler,
        doc="What yields the index lists (None for an IterableDataset, and with batch_size=None).",
    )
    batch_size = property(lambda self: self._batch_size, doc="As given; None with a batch_sampler.")
    _auto_collation = property(
        lambda self: self._batch_size is not None or self._batch_sampler is not None,
        doc="PyTorch's private flag, which its own tests read: whether samples are collated into batches.",
    )
    drop_last = property(lambda self: self._drop_last, doc="As given; False with a batch_sampler.")

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _SET_ONCE and vars(self).get("_initialized"):
            raise ArgumentValueError(
                f"{name} attribute should not be set after {type(self).__name__} is initialized: "
                "the batches were planned from it when the loader was built. Build a new loader "
                f"with {name}={value!r} instead."
            )
        if name in _READ_ONCE and vars(self).get("_initialized"):
            raise AttributeError(
                f"{name} cannot be changed on dataloader.torch.DataLoader: this loader reads it "
                "once, when it is built (PyTorch's reads it again at each iter(loader)). Build a "
                f"new loader with {name}={value!r} instead."
            )
        super().__setattr__(name, value)

    def _is_stream(self, dataset: Any) -> bool:
        """PyTorch's rule: an ``IterableDataset`` is a stream, every other dataset map-style
        (one whose ``__getitem__`` is torch's, which raises, raises at each batch)."""
        return isinstance(dataset, IterableDataset)

    def __len__(self) -> int:
        """PyTorch's length: the index sampler's batches, or for an ``IterableDataset`` its
        ``__len__`` in batches (a ``TypeError`` without one). Once asked for a stream, an epoch
        that yields more batches than the dataset said it has samples warns, as PyTorch's does."""
        if self._sampler is not None:
            return super().__len__()
        length = len(self.dataset)  # TypeError without __len__, as PyTorch's
        self._stream_length = length
        if self._batch_size is None:
            return length
        rounded = math.floor if self._drop_last else math.ceil
        return int(rounded(length / self._batch_size))

    def __iter__(self) -> Any:
        if self._datapipe:  # first, as PyTorch draws the DataPipe's seed before the base seed
            self._seed_datapipe()
        if self._draws_left != 0:
            # One int64 per iterator from the loader's generator, as PyTorch draws its base seed,
            # so that the program's random stream goes on as it would under PyTorch.
            drawn = _draw_int64(self.generator)
            if self._draws_left is not None:
                self._draws_left -= 1
            if self._datapipe and self.num_workers != 0:
                # PyTorch's worker iterator draws the DataPipe's seed once more as it starts (for
                # its own copy, which its workers never read): so does this, to keep the stream.
                _draw_int64(self.generator)
            if not self._seed_fixed:  # the first draw seeds the loader (a state_dict carries it)
                self._seed_fixed = True
                self._pipeline.spec = replace(self._pipeline.spec, base_seed=drawn)
            if self._workers_follow_draws:
                self._pipeline.drawn_workers_seed = drawn
        return _Epoch(super().__iter__(), self.dataset, self._stream_length, self.num_workers != 0)

    def _seed_datapipe(self) -> None:
        """Seed the DataPipe graph's random operations (its shuffler) for this epoch from one
        draw of the loader's generator, and shard it for this process's rank; each worker's
        copy, made as the epoch's workers start, is sharded again for the worker."""
        shared = _draw_int64(self.generator)
        apply_random_seed(self.dataset, torch.Generator().manual_seed(shared))
        world, rank = _distributed_settings()
        self._worker_setup.distributed = (world, rank)
        if self.num_workers == 0:
            apply_sharding(self.dataset, world, rank)

    def load_state_dict(
        self, state: dict[str, Any] | list[dict[str, Any]], *, skip_ahead: bool = False,
        allow_edited: bool = False, reweight: bool = False,
    ) -> None:
        """As :meth:`dataloader.DataLoader.load_state_dict`; the batches keep the saved seed."""
        super().load_state_dict(state, skip_ahead=skip_ahead, allow_edited=allow_edited, reweight=reweight)
        self._seed_fixed = True
        self._workers_follow_draws = False  # from the saved seed on, each epoch's workers their own
        self._pipeline.drawn_workers_seed = None

    def __getstate__(self) -> dict[str, Any]:
        ours = {k: v for k, v in vars(self).items() if k not in ("options", "_transform", "_pipeline", "_initialized")}
        return {**super().__getstate__(), "torch_dropin": ours}

    def __setstate__(self, state: dict[str, Any]) -> None:
        vars(self).update(state["torch_dropin"])
        with _default_generator_untouched():
            super().__setstate__(state)
        vars(self)["_initialized"] = True


# Assigned once, by the constructor: PyTorch's loader refuses to have them changed later.
_SET_ONCE = frozenset({"batch_size", "batch_sampler", "sampler", "drop_last", "dataset", "persistent_workers"})

# Attributes PyTorch lets you change between epochs, which this loader reads once, when built.
_READ_ONCE = frozenset({
    "collate_fn", "worker_init_fn", "in_order", "pin_memory", "pin_memory_device",
    "multiprocessing_context", "prefetch_factor", "num_workers", "timeout",
})

# PyTorch's worker behaviour, as dataloader.DataLoader's options (see the class docstring).
_PYTORCH_WORKERS = {"seeding": "worker", "dispatch": "round_robin", "too_many_workers": "warn"}


def _check_like_pytorch(
    stream: bool, batch_size: Any, shuffle: Any, sampler: Any, batch_sampler: Any, drop_last: Any,
    datapipe: bool = False,
) -> None:
    """PyTorch's rules for options that contradict each other: the same cases, in the same
    order, as ValueError; each message opens with PyTorch's words, then says why and the fix.
    A DataPipe takes ``shuffle`` (its shufflers obey it)."""
    if stream and not datapipe and shuffle not in (False, None):
        raise ArgumentValueError(
            f"DataLoader with IterableDataset: expected unspecified shuffle option, but got "
            f"shuffle={shuffle!r}: a stream has no order to shuffle. Leave shuffle unset, and "
            "shuffle inside the dataset's __iter__."
        )
    for name, value in (("sampler", sampler), ("batch_sampler", batch_sampler)):
        if stream and value is not None:
            raise ArgumentValueError(
                f"DataLoader with IterableDataset: expected unspecified {name} option, but got "
                f"{name}={value!r}: a stream is read in its own order, not by index. Leave "
                "sampler and batch_sampler unset (batch_size and drop_last still apply)."
            )
    if sampler is not None and shuffle:
        raise ArgumentValueError(
            "sampler option is mutually exclusive with shuffle: the sampler decides the order. "
            "Drop shuffle, or drop the sampler (shuffle=True draws a RandomSampler's order)."
        )
    if batch_sampler is not None and (batch_size != 1 or shuffle or sampler is not None or drop_last):
        raise ArgumentValueError(
            "batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and "
            "drop_last: it decides the batches by itself. Leave those at their defaults, or drop "
            "batch_sampler."
        )
    if batch_size is None and drop_last and batch_sampler is None:
        raise ArgumentValueError(
            "batch_size=None option disables auto-batching and is mutually exclusive with "
            "drop_last: there is no last batch to drop. Give a batch_size, or drop drop_last."
        )


def _check_workers_like_pytorch(
    num_workers: Any, timeout: Any, prefetch_factor: Any, persistent_workers: Any, context: Any
) -> None:
    """PyTorch's rules for the worker options, in PyTorch's words and with its exception types."""
    if isinstance(num_workers, int) and num_workers < 0:
        raise ArgumentValueError(
            f"num_workers option should be non-negative; use num_workers=0 to disable "
            f"multiprocessing. Got num_workers={num_workers}."
        )
    if isinstance(timeout, (int, float)) and timeout < 0:
        raise ArgumentValueError(
            f"timeout option should be non-negative; got timeout={timeout}. Use 0 to wait forever."
        )
    if num_workers == 0 and prefetch_factor is not None:
        raise ArgumentValueError(
            "prefetch_factor option could only be specified in multiprocessing: "
            f"prefetch_factor={prefetch_factor!r} makes batches ahead in workers, and "
            "num_workers=0 has none. Set num_workers > 0, or leave prefetch_factor=None."
        )
    if persistent_workers and num_workers == 0:
        raise ArgumentValueError(
            "persistent_workers option needs num_workers > 0: there are no workers to keep. "
            "Set num_workers > 0, or drop persistent_workers."
        )
    if context is None:
        return
    if num_workers == 0:
        raise ArgumentValueError(
            "multiprocessing_context can only be used with multi-process loading "
            "(num_workers > 0), but got num_workers=0: no worker is started. Set num_workers > 0, "
            "or drop multiprocessing_context."
        )
    methods = multiprocessing.get_all_start_methods()
    if isinstance(context, str) and context not in methods:
        raise ArgumentValueError(
            f"multiprocessing_context option should specify a valid start method in {methods!r}, "
            f"but got multiprocessing_context={context!r}."
        )
    if not isinstance(context, (str, multiprocessing.context.BaseContext)):
        raise ArgumentTypeError(
            "multiprocessing_context option should be a valid context object or a string "
            f"specifying the start method, but got multiprocessing_context={context!r}: pass "
            "one of the names above, or multiprocessing.get_context(name)."
        )


_TAKEN = {"framework", "collator", "parallel_stream"}  # decided here (tensors; collate_fn; the stream rule)


def _check_extras(extras: dict[str, Any]) -> None:
    """Only our own keyword options, and none that this class decides, pass through."""
    taken = sorted(set(extras) & _TAKEN)
    if taken:
        raise ArgumentValueError(
            f"dataloader.torch.DataLoader decides {', '.join(taken)} itself (tensors out; "
            "collate_fn is PyTorch's name for a collator; an IterableDataset is read in every "
            "worker). Use dataloader.DataLoader to set them."
        )


def _index_sampler(dataset: Any, shuffle: Any, sampler: Any, generator: Any) -> Any:
    """PyTorch's ``loader.sampler``: the one given, else a random or a sequential one."""
    if sampler is not None:
        return sampler
    return RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)


def _batch_sampler(dataset: Any, sampler: Any, batch_size: Any, drop_last: Any, batch_sampler: Any) -> Any:
    """What our engine iterates: the batch sampler given, torch's ``BatchSampler`` over the index
    sampler, or, for PyTorch's default order, our own sequential one (the same batches, and it
    resumes exactly; built for one process whatever WORLD_SIZE says, as PyTorch's is)."""
    if batch_sampler is not None:
        return batch_sampler
    if type(sampler) is SequentialSampler and batch_size is not None and len(dataset) > 0:
        ours = _OurSequentialSampler(dataset, batch_size, drop_last, world_size=1, rank=0)
        return follow_dataset(ours)
    return BatchSampler(sampler, 1 if batch_size is None else batch_size, drop_last)


class _Unbatched:
    """``batch_size=None``: each one-sample batch becomes ``fn(sample)``, as PyTorch hands out
    samples unbatched (``fn`` is the user's ``collate_fn``, else torch's ``default_convert``)."""

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.fn = fn

    def __call__(self, samples: list[Any]) -> Any:
        return self.fn(samples[0])


class _TorchWorkerInit:
    """``worker_init_fn`` as PyTorch calls it, after ``torch.utils.data.get_worker_info()`` has
    been made to answer in this worker process as :func:`dataloader.get_worker_info` does,
    (``seeding="worker"``) NumPy's global generator seeded as PyTorch's workers seed it, and a
    DataPipe graph sharded for this worker. The engine has seeded ``random`` and torch from
    the seed PyTorch's worker uses (its base seed plus the worker's id)."""

    def __init__(self, user_fn: Callable[[int], None] | None, seed_numpy: bool = False, shard: bool = False) -> None:
        self.user_fn = user_fn
        self.seed_numpy = seed_numpy
        self.shard = shard
        self.distributed = (1, 0)  # (world size, rank) of this process, for a DataPipe's sharding

    def __call__(self, worker_id: int) -> None:
        info = get_worker_info()
        if info is not None:
            _publish_to_torch(info)
            if self.seed_numpy:
                _seed_numpy_like_pytorch((info.seed - info.id) % 2**64, info.id)
            if self.shard:  # every worker of every rank reads its own share, as PyTorch shards it
                world, rank = self.distributed
                apply_sharding(info.dataset, info.num_workers * world, worker_id * world + rank)
        if self.user_fn is not None:
            self.user_fn(worker_id)


def _draw_int64(generator: Any) -> int:
    """One int64 from ``generator`` (torch's default one when None), drawn as PyTorch's loader
    draws its seeds, so that the program's random stream moves as it would under PyTorch."""
    return int(torch.empty((), dtype=torch.int64).random_(generator=generator).item())


def _distributed_settings() -> tuple[int, int]:
    """(world size, rank) where ``torch.distributed`` is initialized, else (1, 0)."""
    distributed = torch.distributed
    if distributed.is_available() and distributed.is_initialized():
        return distributed.get_world_size(), distributed.get_rank()
    return 1, 0


def _seed_numpy_like_pytorch(base_seed: int, worker_id: int) -> None:
    """Seed ``numpy.random`` from (base seed, worker id) with torch's own function for it (a
    private one of torch's since 1.9; where it is missing, NumPy keeps the engine's seed)."""
    try:
        from torch.utils.data._utils.worker import _generate_state
    except ImportError:
        return
    import numpy as np

    np.random.seed(_generate_state(base_seed, worker_id))


class _Epoch:
    """An epoch's iterator as PyTorch's loader hands it out: the engine's, plus PyTorch's
    warning at each batch beyond the length ``len(loader)`` reported for an ``IterableDataset``
    (PyTorch counts batches against the dataset's samples, so this does too), and ``_workers``,
    the worker processes (a private attribute of PyTorch's that its own tests read). The rest
    (``close()``, ``stats()``, ``with``) is the engine iterator's."""

    def __init__(self, epoch: Any, dataset: Any, length: int | None, workers: bool) -> None:
        self._epoch, self._dataset, self._length, self._has_workers = epoch, dataset, length, workers
        self._yielded = 0

    def __iter__(self) -> "_Epoch":
        return self

    def __next__(self) -> Any:
        epoch = self._epoch
        try:
            batch = next(epoch)
        except BaseException:
            # Raised from a frame that holds neither iterator: a traceback the caller keeps must
            # not keep the epoch and its workers up (as the engine's iterator raises).
            self = epoch = None  # type: ignore[assignment]
            raise
        self._yielded += 1
        if self._length is not None and self._yielded > self._length:
            message = (
                f"Length of IterableDataset {self._dataset} was reported to be {self._length} "
                f"(when accessing len(dataloader)), but {self._yielded} samples have been fetched. "
            )
            if self._has_workers:
                message += (
                    "For multiprocessing data-loading, this could be caused by not properly "
                    "configuring the IterableDataset replica at each worker: shard it in __iter__ "
                    "with torch.utils.data.get_worker_info()."
                )
            warnings.warn(message, UserWarning, stacklevel=2)
        return batch

    def __len__(self) -> int:
        return len(self._epoch)

    @property
    def _workers(self) -> list[Any]:
        workers: list[Any] = self._epoch.worker_processes()
        return workers

    def __getattr__(self, name: str) -> Any:
        return getattr(self._epoch, name)

    def __enter__(self) -> "_Epoch":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self._epoch.close()


def _publish_to_torch(info: Any) -> None:
    """Set what ``torch.utils.data.get_worker_info()`` returns in this process (a module global
    of torch's since 1.2; PyTorch's own workers set it the same way)."""
    from torch.utils.data._utils import worker as torch_worker

    torch_worker._worker_info = torch_worker.WorkerInfo(
        id=info.id, num_workers=info.num_workers, seed=info.seed, dataset=info.dataset
    )


@contextlib.contextmanager
def _default_generator_untouched() -> Iterator[None]:
    """Put torch's default generator back as it was: building our engine draws a seed from it
    (see :func:`dataloader.rng.draw_seed`), which a PyTorch loader does not; the seed it draws
    is replaced by the first iterator's draw."""
    state = torch.random.get_rng_state()
    try:
        yield
    finally:
        torch.random.set_rng_state(state)
