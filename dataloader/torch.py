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
from dataclasses import replace
from typing import Any, Callable, Iterator

from .errors import ArgumentValueError
from .loader import DataLoader as _Engine
from .sampler import SequentialSampler as _OurSequentialSampler
from .sampler._map import follow_dataset
from .worker import get_worker_info

try:
    import torch
    from torch.utils.data import BatchSampler, IterableDataset, RandomSampler, SequentialSampler
    from torch.utils.data import default_convert
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
    with ``num_workers=0`` it is read in this process. ``extras`` are
    :class:`dataloader.DataLoader`'s keyword options that PyTorch lacks.
    """

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
        _check_like_pytorch(stream, batch_size, shuffle, sampler, batch_sampler, drop_last)
        _check_workers_like_pytorch(num_workers, prefetch_factor, persistent_workers)
        _check_extras(extras)
        self.generator = generator
        self.collate_fn = collate_fn
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
        with _default_generator_untouched():  # PyTorch draws nothing when a loader is built
            super().__init__(
                dataset,
                engine_sampler,
                collate_fn=collate_fn,
                num_workers=num_workers,
                timeout=timeout,
                parallel_stream=stream and has_workers,
                prefetch_factor=prefetch_factor,
                persistent_workers=persistent_workers,
                multiprocessing_context=multiprocessing_context,
                in_order=in_order,
                worker_init_fn=_TorchWorkerInit(worker_init_fn) if process_workers and has_workers else worker_init_fn,
                pin_memory=pin_memory,
                **{"framework": "torch", **extras},
                **shortcuts,
            )

    sampler = property(
        lambda self: self._sampler,
        doc="The index sampler, as PyTorch's loader has it (None for an IterableDataset).",
    )
    batch_sampler = property(
        lambda self: self._batch_sampler,
        doc="What yields the index lists (None for an IterableDataset, and with batch_size=None).",
    )
    batch_size = property(lambda self: self._batch_size, doc="As given; None with a batch_sampler.")
    drop_last = property(lambda self: self._drop_last, doc="As given; False with a batch_sampler.")

    def __iter__(self) -> Any:
        if self._draws_left != 0:
            # One int64 per iterator from the loader's generator, as PyTorch draws its base seed,
            # so that the program's random stream goes on as it would under PyTorch.
            drawn = int(torch.empty((), dtype=torch.int64).random_(generator=self.generator).item())
            if self._draws_left is not None:
                self._draws_left -= 1
            if not self._seed_fixed:
                self._seed_fixed = True
                self._pipeline.spec = replace(self._pipeline.spec, base_seed=drawn)
        return super().__iter__()

    def load_state_dict(
        self, state: dict[str, Any] | list[dict[str, Any]], *, skip_ahead: bool = False,
        allow_edited: bool = False, reweight: bool = False,
    ) -> None:
        """As :meth:`dataloader.DataLoader.load_state_dict`; the batches keep the saved seed."""
        super().load_state_dict(state, skip_ahead=skip_ahead, allow_edited=allow_edited, reweight=reweight)
        self._seed_fixed = True

    def __getstate__(self) -> dict[str, Any]:
        ours = {k: v for k, v in vars(self).items() if k not in ("options", "_transform", "_pipeline")}
        return {**super().__getstate__(), "torch_dropin": ours}

    def __setstate__(self, state: dict[str, Any]) -> None:
        vars(self).update(state["torch_dropin"])
        with _default_generator_untouched():
            super().__setstate__(state)


def _check_like_pytorch(
    stream: bool, batch_size: Any, shuffle: Any, sampler: Any, batch_sampler: Any, drop_last: Any
) -> None:
    """PyTorch's rules for options that contradict each other: the same cases, as ValueError."""
    if stream and shuffle not in (False, None):
        raise ArgumentValueError(
            f"shuffle={shuffle!r} with an IterableDataset: a stream has no order to shuffle. "
            "Leave shuffle unset, and shuffle inside the dataset's __iter__."
        )
    if stream and (sampler is not None or batch_sampler is not None):
        raise ArgumentValueError(
            "`sampler` or `batch_sampler` with an IterableDataset: a stream is read in its own "
            "order, not by index. Leave both unset (batch_size and drop_last still apply)."
        )
    if sampler is not None and shuffle:
        raise ArgumentValueError(
            "`sampler` and shuffle=True exclude each other: the sampler decides the order. "
            "Drop shuffle, or drop the sampler (shuffle=True draws a RandomSampler's order)."
        )
    if batch_sampler is not None and (batch_size != 1 or shuffle or sampler is not None or drop_last):
        raise ArgumentValueError(
            "`batch_sampler` excludes batch_size, shuffle, sampler and drop_last: it decides "
            "the batches by itself. Leave those at their defaults, or drop batch_sampler."
        )
    if batch_size is None and drop_last:
        raise ArgumentValueError(
            "batch_size=None turns batching off, so there is no last batch for drop_last=True "
            "to drop. Give a batch_size, or drop drop_last."
        )


def _check_workers_like_pytorch(num_workers: Any, prefetch_factor: Any, persistent_workers: Any) -> None:
    """PyTorch's rules for options that need workers."""
    if num_workers == 0 and prefetch_factor is not None:
        raise ArgumentValueError(
            f"prefetch_factor={prefetch_factor!r} needs workers to make batches ahead, and "
            "num_workers=0 has none. Set num_workers > 0, or leave prefetch_factor=None."
        )
    if persistent_workers and num_workers == 0:
        raise ArgumentValueError(
            "persistent_workers=True needs workers to keep, and num_workers=0 has none. "
            "Set num_workers > 0, or drop persistent_workers."
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
    been made to answer in this worker process as :func:`dataloader.get_worker_info` does."""

    def __init__(self, user_fn: Callable[[int], None] | None) -> None:
        self.user_fn = user_fn

    def __call__(self, worker_id: int) -> None:
        info = get_worker_info()
        if info is not None:
            _publish_to_torch(info)
        if self.user_fn is not None:
            self.user_fn(worker_id)


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
