"""DataLoader: validates options and assembles the pipeline. Nothing else."""

from __future__ import annotations

import random
import weakref
from typing import Any, Callable

from ._device.adapters import resolve_adapter
from ._exec.iterator import LoaderIterator
from ._exec.pipeline import PipelineSpec, epoch_length, open_epoch, open_feed, start_pool, workers_read_stream
from ._options import LoaderOptions
from ._validate import check_has_apply, check_non_negative_int
from .callable_source import CallableSource
from .collator import Collator
from .dataset import StreamDataset
from .errors import ArgumentTypeError, ArgumentValueError
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
        epoch_size: int | None = None,
        buffer_size: int = 0,
        buffer_on_request: bool = False,
        repeats: int = 1,
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
            epoch_size=epoch_size,
            buffer_size=buffer_size,
            buffer_on_request=buffer_on_request,
            repeats=repeats,
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
        _check_callable_source(dataset, self._spec.sampler, self.options)
        self._epoch = 0
        self._persistent_pool: Any = None
        self._last_iterator: Any = None
        self._last_recorder: Any = None  # outlives its iterator, so stats() works after the epoch
        self._feed: Any = None

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
        # Fixed-size epochs over workers' own streams keep those streams, so the workers too.
        persistent = self.options.persistent_workers or (
            self.options.epoch_size is not None and workers_read_stream(self._spec)
        )
        if self._persistent_pool is not None:
            self._close_last_iterator()  # its workers are about to serve this epoch
            if self._persistent_pool.broken:
                self.close()  # a worker died last epoch: start afresh rather than fail forever
        if persistent and self._persistent_pool is None:
            self._persistent_pool = start_pool(self._spec)
        if self._feed is None:
            self._feed = open_feed(self._spec)
        iterator = open_epoch(self._spec, epoch, self._persistent_pool, self._feed)
        self._last_iterator = weakref.ref(iterator)
        self._last_recorder = iterator.recorder
        return iterator

    def set_epoch(self, epoch: int) -> None:
        """Make the next ``iter(loader)`` epoch ``epoch`` (and the sampler's, if it has ``set_epoch``).

        Batch seeds derive from (seed, epoch, batch index): a resumed run that
        sets the epoch it stopped at gets the same augmentations it would have.
        """
        self._epoch = check_non_negative_int("epoch", epoch)
        set_sampler_epoch = getattr(self._spec.sampler, "set_epoch", None)
        if set_sampler_epoch is not None:
            set_sampler_epoch(epoch)

    def stats(self) -> Stats:
        """Timings of the latest epoch (see :class:`~dataloader.monitor.Stats`)."""
        recorder = self._last_recorder
        if recorder is None:
            raise RuntimeError("stats() needs an epoch: iterate the loader first.")
        return recorder.snapshot()

    def _close_last_iterator(self) -> None:
        iterator = self._last_iterator() if self._last_iterator is not None else None
        if iterator is not None:
            iterator.close()

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
        length = epoch_length(self._spec)
        if length is None:
            raise TypeError(
                "len() of a DataLoader over a StreamDataset is undefined: a stream's length "
                "is unknown. Count batches while iterating, set epoch_size, or use a map-style Dataset."
            )
        return length

    def allow_buffering(self) -> Any:
        """Let the current epoch's buffer work ahead inside the block (``buffer_on_request=True``)."""
        iterator = self._last_iterator() if self._last_iterator is not None else None
        if iterator is None:
            raise RuntimeError("allow_buffering() needs a running epoch: call iter(loader) first.")
        return iterator.allow_buffering()


def _check_callable_source(dataset: Any, sampler: Any, options: LoaderOptions) -> None:
    if not isinstance(dataset, CallableSource):
        return
    dataset.check_batch_size(sampler.batch_size)
    if options.parallel_stream:
        raise ArgumentValueError(
            "a CallableSource is called by the main process; `parallel_stream=True` does not apply. "
            "Drop parallel_stream."
        )


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
            "a map-style Dataset needs a map sampler; got StreamSampler. Use "
            "SequentialSampler(dataset, batch_size=...) or RandomSampler(dataset, batch_size=...)."
        )
    if not hasattr(sampler, "__iter__"):
        raise ArgumentTypeError(
            f"`sampler` must be iterable (yielding lists of indices); got {type(sampler).__name__}."
        )
    return sampler
