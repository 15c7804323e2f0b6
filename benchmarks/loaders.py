"""The ways of making batches (our loader with its settings, PyTorch's, the plain loop, a step
with no loading) and the consumer's calibrated step.

A run is a :class:`RunSpec`: how to open its iterator (and, for our loader, how to read
``loader.stats()`` afterwards), what to do with every batch, and a context to run it in.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Iterator

import numpy as np

from dataloader import Collator, DataLoader, Dataset, RandomSampler

from .batches import plain_batches, touch
from .workloads import BASELINE, COLLATOR_FLOOR, LOAD_ONLY, MONITOR, OURS, OUR_OPTIONS, STEP_ONLY, TORCH

if TYPE_CHECKING:
    from .config import BenchConfig

# (iterator, loader.stats or None)
Opened = tuple[Iterator, "Callable[[], Any] | None"]


class MatmulStep:
    """A training step stand-in: ``touch`` the batch, then ``count`` products of two 256x256
    float32 matrices. NumPy releases the GIL inside BLAS, as a framework's step does in its
    kernels; run it under :func:`one_blas_thread` so that it takes one CPU, as a step that
    runs on an accelerator leaves the host's CPUs to the loader."""

    SIDE = 256

    def __init__(self, count: int) -> None:
        self.count = max(1, int(count))
        rng = np.random.default_rng(3)
        self._a, self._b = (rng.standard_normal((self.SIDE, self.SIDE), np.float32) for _ in "ab")
        self._out = np.empty_like(self._a)

    def __call__(self, batch: Any) -> None:
        touch(batch)
        for _ in range(self.count):
            np.matmul(self._a, self._b, out=self._out)

    @classmethod
    def lasting(cls, seconds: float) -> "MatmulStep":
        """A step of about ``seconds``, from the median of 7 timings of 20 products (call
        under :func:`one_blas_thread`); :func:`refit` corrects it from a real run."""
        probe = cls(20)
        probe(())
        timings = []
        for _ in range(7):
            start = time.perf_counter()
            probe(())
            timings.append((time.perf_counter() - start) / probe.count)
        return cls(round(seconds / sorted(timings)[3]))

    def refit(self, seconds: float, measured: float) -> "MatmulStep":
        """This step rescaled from ``measured`` seconds to about ``seconds``."""
        return MatmulStep(round(self.count * seconds / measured))


@contextlib.contextmanager
def one_blas_thread() -> Iterator[bool]:
    """NumPy's BLAS limited to one thread inside the block (with threadpoolctl, which the
    test extra installs); yields whether it could be."""
    try:
        import threadpoolctl
    except ImportError:
        yield False
        return
    with threadpoolctl.threadpool_limits(limits=1, user_api="blas"):
        yield True


@contextlib.contextmanager
def monitoring(on: bool) -> Iterator[None]:
    """``DATALOADER_MONITOR=1`` (or unset) for iterators started inside the block; when on,
    the ``dataloader`` logger takes INFO records into a NullHandler, so the stage tables
    are made and logged as a user's would be, without flooding the output."""
    names = ("DATALOADER_MONITOR", "MGE_DATA_MONITOR")
    saved = {name: os.environ.pop(name, None) for name in names}
    logger = logging.getLogger("dataloader")
    before, handler = (logger.level, logger.propagate), logging.NullHandler()
    if on:
        os.environ["DATALOADER_MONITOR"] = "1"
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(before[0])
        logger.propagate = before[1]
        for name, value in saved.items():
            os.environ.pop(name, None)
            if value is not None:
                os.environ[name] = value


def started_by_fork(workers: int) -> dict:
    """``multiprocessing_context="fork"`` where there are workers, for ours and PyTorch's alike:
    Python 3.14 starts them by forkserver, whose server outlives the run and whose workers are
    not this process's children, so their CPU would go uncounted and the server would count as a
    leftover process. The bench measures loading; every figure since 2025 was taken under fork."""
    return {"multiprocessing_context": "fork"} if workers else {}


def our_loader(dataset: Dataset, sampler: Any, workers: int, config: "BenchConfig",
               label: str = OURS) -> DataLoader:
    """Our loader as run ``label`` sets it up (see ``OUR_OPTIONS``)."""
    # No loader seed, as MegEngine users write it: the sampler's seed fixes the order.
    return DataLoader(dataset, sampler, num_workers=workers, prefetch_factor=config.prefetch_factor,
                      **{**started_by_fork(workers), **OUR_OPTIONS[label]})


def random_loader(dataset: Dataset, batch_size: int, workers: int, seed: int,
                  **options: Any) -> DataLoader:
    """Our loader in random order from a sampler seeded with ``seed`` (and no loader seed,
    as above), with the other tools' ``options``."""
    sampler = RandomSampler(dataset, batch_size=batch_size, seed=seed)
    return DataLoader(dataset, sampler, num_workers=workers, **{**started_by_fork(workers), **options})


def torch_loader(dataset: Dataset, batch_size: int, workers: int, seed: int,
                 prefetch_factor: int = 2, **options: Any) -> Any:
    """PyTorch's DataLoader shuffled by a generator seeded with ``seed``, as users write it."""
    import torch
    from torch.utils.data import DataLoader as TorchLoader

    return TorchLoader(
        dataset, batch_size=batch_size, shuffle=True,
        generator=torch.Generator().manual_seed(seed), num_workers=workers,
        prefetch_factor=prefetch_factor if workers else None, **{**started_by_fork(workers), **options},
    )


def open_ours(dataset: Dataset, batch_size: int, workers: int, config: "BenchConfig",
              label: str = OURS) -> Opened:
    loader = random_loader(dataset, batch_size, workers, config.seed,
                           prefetch_factor=config.prefetch_factor, **OUR_OPTIONS[label])
    return iter(loader), loader.stats


def open_torch(dataset: Dataset, batch_size: int, workers: int, config: "BenchConfig") -> Opened:
    loader = torch_loader(dataset, batch_size, workers, config.seed, config.torch_prefetch_factor,
                          persistent_workers=False)
    return iter(loader), None


def open_baseline(dataset: Dataset, batch_size: int, workers: int, config: "BenchConfig",
                  collate: Callable[[list], Any] | None = None) -> Opened:
    """The same batches from a plain loop: ``dataset[i]`` for each index, then ``np.stack``
    (or ``collate``).

    It goes on into further epochs in the same order (they cost it nothing), so that a fast
    baseline is still timed for the full ``seconds`` where a loader's epoch ends sooner.
    """
    order = np.random.default_rng(config.seed).permutation(len(dataset))
    return plain_batches(dataset, order, batch_size, forever=True, collate=collate), None


def open_collator_floor(dataset: Dataset, batch_size: int, workers: int, config: "BenchConfig") -> Opened:
    """The plain loop of :func:`open_baseline` with our :class:`~dataloader.Collator` in place
    of its ``stack``: the same batches, each checked as our loader checks them."""
    return open_baseline(dataset, batch_size, workers, config, collate=Collator().apply)


def open_step_only(dataset: Dataset, batch_size: int, workers: int, config: "BenchConfig") -> Opened:
    """One batch made up front and handed out forever: the consumer's step with no loading."""
    batch = next(plain_batches(dataset, list(range(batch_size)), batch_size))
    return itertools.repeat(batch), None


@dataclass
class RunSpec:
    """One run: ``open()`` gives (iterator, stats or None); ``consume`` gets every batch;
    the whole run, start-up to shutdown, happens inside ``around()``."""

    open: Callable[[], Opened]
    consume: Callable[[Any], Any] = touch
    around: Callable[[], ContextManager] = field(default=contextlib.nullcontext)


def run_spec(label: str, dataset: Dataset, batch_size: int, workers: int,
             config: "BenchConfig", step: MatmulStep | None = None) -> RunSpec:
    """The run called ``label`` (any but the ideal, which has no iterator). With ``step`` (the
    preload workload), the step is the consumer, on one BLAS thread."""
    openers = {TORCH: open_torch, BASELINE: open_baseline, STEP_ONLY: open_step_only,
               COLLATOR_FLOOR: open_collator_floor}
    if label in openers:
        opener = lambda: openers[label](dataset, batch_size, workers, config)
    else:
        opener = lambda: open_ours(dataset, batch_size, workers, config, label)
    consume = step if step is not None and label != LOAD_ONLY else touch

    @contextlib.contextmanager
    def around() -> Iterator[None]:
        with monitoring(label == MONITOR):
            with one_blas_thread() if step is not None else contextlib.nullcontext():
                yield

    return RunSpec(opener, consume, around)


def close_iterator(iterator: Any) -> None:
    """Stop ``iterator``'s workers now where it can say so (ours, generators); PyTorch's
    iterator stops (and joins) its workers when the last reference to it is dropped."""
    close = getattr(iterator, "close", None)
    if close is not None:
        close()
