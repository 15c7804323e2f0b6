"""Loader options: validated once, at construction, then frozen."""

from __future__ import annotations

import multiprocessing
from dataclasses import dataclass
from typing import Any, Callable

from ._validate import (
    check_bool,
    check_choice,
    check_non_negative_int,
    check_optional_seed,
    check_positive_int,
    check_timeout,
)
from .errors import ArgumentTypeError, ArgumentValueError

START_METHODS = ("fork", "spawn", "forkserver")
WORKER_TYPES = ("process", "thread")


@dataclass(frozen=True)
class LoaderOptions:
    """Every knob of a :class:`DataLoader` besides its building blocks."""

    num_workers: int = 0
    # 0 waits forever, as in MegEngine and PyTorch; so does infinity, stored as 0.
    timeout: float = 0.0
    preload: bool = False
    parallel_stream: bool = False
    # Batches (messages of batches_per_message batches, if given) each worker makes ahead.
    # None: two messages, which keep every worker busy while the consumer takes one without
    # holding much memory (PyTorch's default of 2 batches), of batches sized as below.
    prefetch_factor: int | None = None
    # None: one batch per message where prefetch_factor is given (PyTorch's meaning, exactly),
    # else as many as ~2 ms of a worker's work, measured (see _exec/grouping.py).
    batches_per_message: int | None = None
    persistent_workers: bool = False
    multiprocessing_context: Any = None
    in_order: bool = True
    seed: int | None = None
    worker_init_fn: Callable[[int], None] | None = None
    # None: sized from the first batches (see the transport's budget rules).
    shm_budget: int | None = None
    worker_type: str = "process"
    # One batch converted ahead hides one copy; more only helps when copy
    # times vary a lot, and each costs a batch of device memory.
    preload_depth: int = 1
    device: Any = None
    framework: str | None = None
    pin_memory: bool = False
    # Stream tools: fixed-size epochs, a background buffer, data echoing.
    epoch_size: int | None = None
    buffer_size: int = 0
    buffer_on_request: bool = False
    repeats: int = 1

    def __post_init__(self) -> None:
        # Checked values are stored as the checks return them (a NumPy integer as an int,
        # an infinite timeout as 0), so nothing downstream meets a type it did not expect.
        checked = {
            "num_workers": check_non_negative_int("num_workers", self.num_workers),
            "timeout": check_timeout("timeout", self.timeout),
            "preload": check_bool("preload", self.preload),
            "parallel_stream": check_bool("parallel_stream", self.parallel_stream),
            "persistent_workers": check_bool("persistent_workers", self.persistent_workers),
            "in_order": check_bool("in_order", self.in_order),
            "seed": check_optional_seed("seed", self.seed),
            "preload_depth": check_positive_int("preload_depth", self.preload_depth),
            "pin_memory": check_bool("pin_memory", self.pin_memory),
            "buffer_size": check_non_negative_int("buffer_size", self.buffer_size),
            "buffer_on_request": check_bool("buffer_on_request", self.buffer_on_request),
            "repeats": check_positive_int("repeats", self.repeats),
        }
        if self.shm_budget is not None:
            checked["shm_budget"] = check_positive_int("shm_budget", self.shm_budget, "It is a number of bytes.")
        if self.prefetch_factor is not None:
            checked["prefetch_factor"] = check_positive_int("prefetch_factor", self.prefetch_factor)
        if self.batches_per_message is not None:
            checked["batches_per_message"] = check_positive_int("batches_per_message", self.batches_per_message)
        if self.epoch_size is not None:
            checked["epoch_size"] = check_positive_int("epoch_size", self.epoch_size)
        for name, value in checked.items():
            object.__setattr__(self, name, value)
        if self.persistent_workers and self.num_workers == 0:
            raise ArgumentValueError(
                "`persistent_workers=True` needs worker processes; got num_workers=0. "
                "Set num_workers >= 1 or drop persistent_workers."
            )
        if self.worker_init_fn is not None and not callable(self.worker_init_fn):
            raise ArgumentTypeError(
                f"`worker_init_fn` must be callable (worker_id) -> None; got {self.worker_init_fn!r}."
            )
        _check_context(self.multiprocessing_context)
        check_choice("worker_type", self.worker_type, WORKER_TYPES)
        if self.buffer_on_request and not self.buffer_size:
            raise ArgumentValueError(
                "`buffer_on_request=True` needs a buffer; got buffer_size=0. Set buffer_size >= 1."
            )

    @property
    def messages_ahead(self) -> int:
        """Messages of tasks each worker may have outstanding."""
        return 2 if self.prefetch_factor is None else self.prefetch_factor

    @property
    def fixed_group(self) -> int | None:
        """Tasks per message, or None where they are sized from measured batches."""
        if self.batches_per_message is not None:
            return self.batches_per_message
        return None if self.prefetch_factor is None else 1

    def context(self) -> multiprocessing.context.BaseContext:
        """The multiprocessing context workers start from."""
        if self.multiprocessing_context is None:
            return multiprocessing.get_context()
        if isinstance(self.multiprocessing_context, str):
            return multiprocessing.get_context(self.multiprocessing_context)
        return self.multiprocessing_context


def _check_context(value: Any) -> None:
    if value is None or isinstance(value, multiprocessing.context.BaseContext):
        return
    if isinstance(value, str):
        if value not in multiprocessing.get_all_start_methods():
            allowed = ", ".join(repr(m) for m in multiprocessing.get_all_start_methods())
            raise ArgumentValueError(
                f"`multiprocessing_context` must be one of {allowed} or a context object; "
                f"got {value!r}."
            )
        return
    raise ArgumentTypeError(
        "`multiprocessing_context` must be a start method name or a multiprocessing context; "
        f"got {type(value).__name__}."
    )
