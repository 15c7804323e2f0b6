"""DataLoader: validates options and assembles the pipeline. Nothing else."""

from __future__ import annotations

import random
import weakref
from typing import Any, Callable

from ._exec.iterator import LoaderIterator
from ._device.adapters import resolve_adapter
from ._exec.pipeline import PipelineSpec, open_epoch, start_pool
from ._options import LoaderOptions
from ._validate import check_has_apply
from .collator import Collator
from .dataset import StreamDataset
from .errors import ArgumentTypeError
from .monitor import Stats
from .sampler import SequentialSampler, StreamSampler
from .transform import PseudoTransform
from .transform._base import split_batch_transforms


class DataLoader:
    """Iterates batches of ``dataset`` drawn by ``sampler``.

    The positional arguments are MegEngine's. ``num_workers=0`` makes batches
    in the calling process; ``num_workers > 0`` in worker processes that hand
    them back through shared memory. Each ``iter(loader)`` is a new epoch.
    Keyword-only options use PyTorch's names where PyTorch has one.
    """

    def __init__(
        self,
        dataset: Any,
        sampler: Any = None,
        transform: Any = None,
        collator: Any = None,
        num_workers: int = 0,
        timeout: float = 0,
        preload: bool = False,
        parallel_stream: bool = False,
        *,
        prefetch_factor: int = 2,
        persistent_workers: bool = False,
        multiprocessing_context: Any = None,
        in_order: bool = True,
        seed: int | None = None,
        worker_init_fn: Callable[[int], None] | None = None,
        shm_budget: int | None = None,
        worker_type: str = "process",
        preload_depth: int = 1,
        device: Any = None,
        framework: str | None = None,
        pin_memory: bool = False,
    ) -> None:
        self.options = LoaderOptions(
            num_workers=num_workers,
            timeout=timeout,
            preload=preload,
            parallel_stream=parallel_stream,
            prefetch_factor=prefetch_factor,
            persistent_workers=persistent_workers,
            multiprocessing_context=multiprocessing_context,
            in_order=in_order,
            seed=seed,
            worker_init_fn=worker_init_fn,
            shm_budget=shm_budget,
            worker_type=worker_type,
            preload_depth=preload_depth,
            device=device,
            framework=framework,
            pin_memory=pin_memory,
        )
        is_stream = _is_stream(dataset)
        transform = check_has_apply("transform", transform or PseudoTransform(), "Transform")
        sample_transform, batch_transforms = split_batch_transforms(transform)
        self._spec = PipelineSpec(
            dataset=dataset,
            sampler=_checked_sampler(dataset, sampler, is_stream),
            transform=sample_transform,
            collator=check_has_apply("collator", collator or Collator(), "Collator"),
            options=self.options,
            is_stream=is_stream,
            base_seed=seed if seed is not None else random.SystemRandom().getrandbits(63),
            adapter=resolve_adapter(device, framework, pin_memory),
            batch_transforms=batch_transforms,
        )
        self._transform = transform
        self._epoch = 0
        self._persistent_pool: Any = None
        self._last_iterator: Any = None

    dataset = property(lambda self: self._spec.dataset)
    sampler = property(lambda self: self._spec.sampler)
    transform = property(lambda self: self._transform)
    collator = property(lambda self: self._spec.collator)
    num_workers = property(lambda self: self.options.num_workers)
    timeout = property(lambda self: self.options.timeout)
    preload = property(lambda self: self.options.preload)
    parallel_stream = property(lambda self: self.options.parallel_stream)

    def __iter__(self) -> LoaderIterator:
        epoch = self._epoch
        self._epoch += 1
        if self.options.persistent_workers and self._persistent_pool is None:
            self._persistent_pool = start_pool(self._spec)
        iterator = open_epoch(self._spec, epoch, self._persistent_pool)
        self._last_iterator = weakref.ref(iterator)
        self._last_recorder = iterator.recorder
        return iterator

    def stats(self) -> Stats:
        """Timings of the latest epoch (see :class:`~dataloader.monitor.Stats`)."""
        recorder = getattr(self, "_last_recorder", None)
        if recorder is None:
            raise RuntimeError("stats() needs an epoch: iterate the loader first.")
        return recorder.snapshot()

    def close(self) -> None:
        """Stop persistent workers, if any. Iterators stop their own workers."""
        pool, self._persistent_pool = self._persistent_pool, None
        if pool is not None:
            pool.shutdown()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __len__(self) -> int:
        if self._spec.is_stream:
            raise TypeError(
                "len() of a DataLoader over a StreamDataset is undefined: a stream's length "
                "is unknown. Count batches while iterating, or use a map-style Dataset."
            )
        return len(self._spec.sampler)


def _is_stream(dataset: Any) -> bool:
    if isinstance(dataset, StreamDataset):
        return True
    if hasattr(dataset, "__getitem__") and hasattr(dataset, "__len__"):
        return False
    raise ArgumentTypeError(
        f"`dataset` must be a Dataset (with __getitem__ and __len__) or a StreamDataset (with "
        f"__iter__); got {type(dataset).__name__}. Wrap an iterable in a StreamDataset subclass."
    )


def _checked_sampler(dataset: Any, sampler: Any, is_stream: bool) -> Any:
    if sampler is None:
        return StreamSampler(batch_size=1) if is_stream else SequentialSampler(dataset)
    stream_sampler = isinstance(sampler, StreamSampler) or isinstance(
        getattr(sampler, "sampler", None), StreamSampler
    )
    if is_stream and not stream_sampler:
        raise ArgumentTypeError(
            f"a StreamDataset needs a StreamSampler; got {type(sampler).__name__}. "
            "Use sampler=StreamSampler(batch_size=...)."
        )
    if not is_stream and stream_sampler:
        raise ArgumentTypeError(
            f"a map-style Dataset needs a map sampler; got StreamSampler. Use "
            "SequentialSampler(dataset, batch_size=...) or RandomSampler(dataset, batch_size=...)."
        )
    if not hasattr(sampler, "__iter__"):
        raise ArgumentTypeError(
            f"`sampler` must be iterable (yielding lists of indices); got {type(sampler).__name__}."
        )
    return sampler
