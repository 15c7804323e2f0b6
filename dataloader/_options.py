"""Loader options: validated once, at construction, then frozen."""

from __future__ import annotations

import multiprocessing
from dataclasses import dataclass
from typing import Any, Callable

from ._validate import (
    check_bool,
    check_choice,
    check_non_negative_int,
    check_non_negative_number,
    check_optional_seed,
    check_positive_int,
)
from .errors import ArgumentTypeError, ArgumentValueError

START_METHODS = ("fork", "spawn", "forkserver")
WORKER_TYPES = ("process", "thread")


@dataclass(frozen=True)
class LoaderOptions:
    """Every knob of a :class:`DataLoader` besides its building blocks."""

    num_workers: int = 0
    # 0 waits forever, as in MegEngine and PyTorch.
    timeout: float = 0.0
    preload: bool = False
    parallel_stream: bool = False
    # Two batches per worker keep every worker busy while the consumer takes
    # one, without holding much memory (PyTorch's default too).
    prefetch_factor: int = 2
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
        check_non_negative_int("num_workers", self.num_workers)
        check_non_negative_number("timeout", self.timeout, "Use 0 to wait forever.")
        check_bool("preload", self.preload)
        check_bool("parallel_stream", self.parallel_stream)
        check_positive_int("prefetch_factor", self.prefetch_factor)
        check_bool("persistent_workers", self.persistent_workers)
        check_bool("in_order", self.in_order)
        check_optional_seed("seed", self.seed)
        if self.persistent_workers and self.num_workers == 0:
            raise ArgumentValueError(
                "`persistent_workers=True` needs worker processes; got num_workers=0. "
                "Set num_workers >= 1 or drop persistent_workers."
            )
        if self.worker_init_fn is not None and not callable(self.worker_init_fn):
            raise ArgumentTypeError(
                f"`worker_init_fn` must be callable (worker_id) -> None; got {self.worker_init_fn!r}."
            )
        if self.shm_budget is not None:
            check_positive_int("shm_budget", self.shm_budget, "It is a number of bytes.")
        _check_context(self.multiprocessing_context)
        check_choice("worker_type", self.worker_type, WORKER_TYPES)
        check_positive_int("preload_depth", self.preload_depth)
        check_bool("pin_memory", self.pin_memory)
        if self.epoch_size is not None:
            check_positive_int("epoch_size", self.epoch_size)
        check_non_negative_int("buffer_size", self.buffer_size)
        check_bool("buffer_on_request", self.buffer_on_request)
        if self.buffer_on_request and not self.buffer_size:
            raise ArgumentValueError(
                "`buffer_on_request=True` needs a buffer; got buffer_size=0. Set buffer_size >= 1."
            )
        check_positive_int("repeats", self.repeats)

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
