"""Random state as a function of (seed, epoch, batch index), not of the worker.

That is what makes a seeded loader give the same batches for any
``num_workers``: whichever process makes batch k seeds ``random``,
``numpy.random`` and (if already imported) torch the same way first.
In the main process :class:`GlobalSeeding` also puts the caller's state back
after each batch, at a cost kept small since it is paid per batch.
"""

from __future__ import annotations

import functools
import logging
import random
import sys
from contextlib import contextmanager
from typing import Any, Iterator

import numpy as np

logger = logging.getLogger("dataloader")


_MASK = (1 << 64) - 1
_STREAM = 0x5EED_57EA  # sets stream seeds apart from batch seeds
_WORKERS = 0x3A7B_0C1D  # sets the seeds of seeding="worker"'s workers apart from both


def _mix(value: int) -> int:
    """SplitMix64's finaliser: a cheap, well-spread 64-bit hash."""
    value = (value + 0x9E3779B97F4A7C15) & _MASK
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & _MASK
    return value ^ (value >> 31)


def batch_seed(seed: int, epoch: int, index: int) -> int:
    """A 63-bit seed for batch ``index`` of ``epoch`` (it runs per batch: the part that does not
    depend on ``index`` is kept from the last call)."""
    return _mix(_epoch_part(seed, epoch) ^ index) >> 1


@functools.lru_cache(maxsize=16)
def _epoch_part(seed: int, epoch: int) -> int:
    return _mix(_mix(seed) ^ epoch)


def stream_seed(seed: int, epoch: int, index: int) -> int:
    """The seed a stream read by a worker draws with while batch ``index`` of ``epoch`` is read
    (apart from the seed that batch's transforms draw with)."""
    return batch_seed(seed ^ _STREAM, epoch, index)


def workers_seed(seed: int, epoch: int) -> int:
    """The base seed of epoch ``epoch``'s workers under ``seeding="worker"`` (worker ``w`` seeds
    itself with this plus ``w``, as PyTorch's do): ``seed`` itself in epoch 0, a seed of its own
    in each later epoch, so that the workers of each epoch draw anew."""
    return seed if epoch == 0 else batch_seed(seed ^ _WORKERS, epoch, 0)


def seed_all(seed: int) -> None:
    """Seed ``random``, ``numpy.random`` and torch (only if the program imported it)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch = sys.modules.get("torch")
    if torch is not None:
        # The CPU generator only: torch.manual_seed also queues seeding of every
        # accelerator backend, which costs ~100 us a call, per batch.
        torch.default_generator.manual_seed(seed)


# numpy >= 1.25 lets the global RandomState draw from another bit generator; 1.24 does not.
_SWAPS_BIT_GENERATORS = hasattr(np.random, "set_bit_generator")


class GlobalSeeding:
    """Seeds ``random``, ``numpy.random`` and torch for one batch made in the main process, and
    puts the caller's state back after it (:meth:`seed`, then :meth:`restore`).

    It runs per batch, so each part takes the cheapest exact way: ``numpy.random`` draws from a
    bit generator of this object's own during the batch, seeded as :func:`seed_all` seeds
    (``np.random.seed``), while the caller's stays untouched (``get_state``/``set_state`` of the
    624-word state cost ~100 us a batch); ``random`` and torch are saved and restored (~15 us and
    ~3 us). One object per batch maker: a loader read inside another one's batch swaps in its own.

    What it does not keep: a normal that ``numpy.random``'s legacy normal functions made as the
    second of a pair and hold for the next call is dropped (the swap resets it, and reading it
    costs what ``get_state`` does); the caller's next normal is then a fresh one of its stream.
    """

    def __init__(self) -> None:
        self._numpy: np.random.BitGenerator | None = None  # what numpy.random draws from in a batch

    def seed(self, seed: int) -> tuple[Any, Any, Any]:
        """Seed the global generators for one batch; the caller's states, for :meth:`restore`."""
        saved_random = random.getstate()
        torch = sys.modules.get("torch")
        saved_torch = torch.default_generator.get_state() if torch is not None else None
        saved_numpy = self._swap_numpy()
        random.seed(seed)
        np.random.seed(seed % 2**32)
        if torch is not None:
            torch.default_generator.manual_seed(seed)  # the CPU generator only, as in seed_all
        return saved_random, saved_numpy, saved_torch

    def restore(self, saved: tuple[Any, Any, Any]) -> None:
        """Put back the states :meth:`seed` returned."""
        saved_random, saved_numpy, saved_torch = saved
        random.setstate(saved_random)
        if _SWAPS_BIT_GENERATORS:
            np.random.set_bit_generator(saved_numpy)
        else:
            np.random.set_state(saved_numpy)
        if saved_torch is not None:
            sys.modules["torch"].default_generator.set_state(saved_torch)

    def _swap_numpy(self) -> Any:
        """Make ``numpy.random`` draw from this object's bit generator; the caller's (or, on
        numpy 1.24, its state) for :meth:`restore`."""
        if not _SWAPS_BIT_GENERATORS:
            return np.random.get_state()
        callers = np.random.get_bit_generator()
        if self._numpy is None:
            self._numpy = np.random.MT19937(0)  # the legacy seeding np.random.seed applies needs MT19937
        np.random.set_bit_generator(self._numpy)
        return callers


def global_draw_marks() -> tuple:
    """A fingerprint of ``random``'s, ``numpy.random``'s and (if imported) torch's CPU
    generator's global state: the same before and after code that drew nothing from them (what
    thread workers check, since one global state serves every thread and no per-batch seed can
    make its draws reproducible there)."""
    if _SWAPS_BIT_GENERATORS:
        bits = np.random.get_bit_generator()
        numpy_state = (id(bits), _frozen(bits.state))
    else:
        numpy_state = (0, _frozen(np.random.get_state(legacy=False)))
    torch = sys.modules.get("torch")
    torch_state = None if torch is None else bytes(torch.default_generator.get_state().numpy())
    return random.getstate(), numpy_state, torch_state


_warned_global_draws = False


def warn_global_draws(task: Any) -> None:
    """Say once per process (a log record, which ``-W error`` leaves alone: the draws may be
    another thread's) that code run by a thread worker drew from the global generators."""
    global _warned_global_draws
    if _warned_global_draws:
        return
    _warned_global_draws = True
    logger.warning(
        "random, numpy.random or torch's generator was drawn from while a thread worker made "
        "batch %d of epoch %d: a transform, the dataset or the collator uses the global random "
        "generators, which thread workers share (or another thread of yours drew meanwhile). The "
        "loader seeds them per batch only in process workers and with num_workers=0, so under "
        "threads these draws follow no seed= and differ from process workers'. Draw from "
        "dataloader.batch_rng() instead (seeded per batch by every kind of worker), or pass "
        "worker_type='process' (threads are the default on a free-threaded Python).",
        task.index, task.epoch,
    )


def _frozen(state: Any) -> Any:
    """A bit generator's state dict as something ``==`` compares (arrays as bytes)."""
    if isinstance(state, dict):
        return tuple((key, _frozen(value)) for key, value in state.items())
    if isinstance(state, np.ndarray):
        return state.tobytes()
    return state


@contextmanager
def seeded_then_restored(seed: int) -> Iterator[None]:
    """Seed everything for one batch, then put the caller's random state back
    (:class:`GlobalSeeding` in a ``with`` block)."""
    seeding = GlobalSeeding()
    saved = seeding.seed(seed)
    try:
        yield
    finally:
        seeding.restore(saved)
