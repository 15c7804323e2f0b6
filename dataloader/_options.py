"""Loader options: validated once, at construction, then frozen."""

from __future__ import annotations

import multiprocessing
import os
from dataclasses import dataclass
from typing import Any, Callable

from ._validate import (
    check_bool,
    check_choice,
    check_non_negative_int,
    check_optional_seed,
    check_positive_int,
    check_timeout,
    warn_argument,
)
from ._gil import default_worker_type
from ._failure_book import DEFAULT_MAX_ERRORS, ON_ERROR, check_max_errors
from .errors import ArgumentTypeError, ArgumentValueError
from .memory import max_workers, shm_ceiling

START_METHODS = ("fork", "spawn", "forkserver")
AUTO = "auto"
_AUTO_HINT = "Or 'auto', to have it tuned while the loader runs."
WORKER_TYPES = ("process", "thread")
_PLURALS = {"process": "processes", "thread": "threads"}
# "batch": random state seeded per batch from (seed, epoch, index), the same for any worker
# count; "worker": PyTorch's scheme, each worker seeded once from seed + worker id.
SEEDINGS = ("batch", "worker")
# "least_busy": the next task to the worker with the fewest outstanding; "round_robin": to the
# workers in turn, so worker i makes batches i, i + n, ... (PyTorch's dispatch).
DISPATCHES = ("least_busy", "round_robin")
# What num_workers above max_workers() does: refused, or warned about (PyTorch's way).
TOO_MANY_WORKERS = ("raise", "warn")


@dataclass(frozen=True)
class LoaderOptions:
    """Every knob of a :class:`DataLoader` besides its building blocks."""

    # An int, or "auto": the autotuner sizes the pool while it runs (dataloader/_tune).
    num_workers: int | str = 0
    # 0 waits forever, as in MegEngine and PyTorch; so does infinity, stored as 0.
    timeout: float = 0.0
    preload: bool = False
    parallel_stream: bool = False
    # Batches (messages of batches_per_message batches, if given) each worker makes ahead.
    # None: two messages, which keep every worker busy while the consumer takes one without
    # holding much memory (PyTorch's default of 2 batches), of batches sized as below.
    # "auto" (also what num_workers="auto" implies when it is None): tuned from batch times.
    prefetch_factor: int | str | None = None
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
    # None: threads where the GIL is off (a free-threaded build), processes elsewhere (_gil.py).
    worker_type: str | None = None
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
    # Bad samples (docs/bad-samples.md): what becomes of a sample whose fetch or transform
    # fails, how many may fail per epoch (None: DEFAULT_MAX_ERRORS under skip and replace),
    # and the JSON-lines log of each one (None: DATALOADER_ERROR_LOG, when set).
    on_error: str = "raise"
    max_errors: int | float | None = None
    error_log: str | None = None
    # StageHook objects told of every fetch, transform and collate (dataloader.hooks).
    hooks: tuple = ()
    seeding: str = "batch"
    dispatch: str = "least_busy"
    too_many_workers: str = "raise"

    def __post_init__(self) -> None:
        # Checked values are stored as the checks return them (a NumPy integer as an int,
        # an infinite timeout as 0), so nothing downstream meets a type it did not expect.
        if self.worker_type is None:  # num_workers=0 starts no worker: nothing to decide or report
            chosen = default_worker_type(self.multiprocessing_context) if self.num_workers != 0 else "process"
            object.__setattr__(self, "worker_type", chosen)
        check_choice("worker_type", self.worker_type, WORKER_TYPES)
        check_choice("seeding", self.seeding, SEEDINGS)
        check_choice("dispatch", self.dispatch, DISPATCHES)
        check_choice("too_many_workers", self.too_many_workers, TOO_MANY_WORKERS)
        checked = {
            "num_workers": _check_workers(self.num_workers, self.worker_type, self.too_many_workers),
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
            checked["shm_budget"] = _check_shm_budget(self.shm_budget)
        if self.prefetch_factor is not None and self.prefetch_factor != AUTO:
            checked["prefetch_factor"] = check_positive_int("prefetch_factor", self.prefetch_factor, _AUTO_HINT)
        if self.batches_per_message is not None:
            checked["batches_per_message"] = check_positive_int("batches_per_message", self.batches_per_message)
        if self.epoch_size is not None:
            checked["epoch_size"] = check_positive_int("epoch_size", self.epoch_size)
        if self.max_errors is not None:
            checked["max_errors"] = check_max_errors(self.max_errors)
        checked["hooks"] = _check_hooks(self.hooks)
        if self.error_log is not None:
            checked["error_log"] = _check_path("error_log", self.error_log)
        for name, value in checked.items():
            object.__setattr__(self, name, value)
        check_choice("on_error", self.on_error, ON_ERROR)
        if self.prefetch_factor == AUTO and self.num_workers == 0:
            raise ArgumentValueError(
                "`prefetch_factor='auto'` tunes how far workers make batches ahead; with "
                "num_workers=0 there are none. Set num_workers (an int, or 'auto') or drop prefetch_factor."
            )
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
        if self.buffer_on_request and not self.buffer_size:
            raise ArgumentValueError(
                "`buffer_on_request=True` needs a buffer; got buffer_size=0. Set buffer_size >= 1."
            )

    @property
    def error_limit(self) -> int | float | None:
        """Failed samples allowed per epoch, or None where every failure is raised."""
        if self.on_error == "raise":
            return None
        return DEFAULT_MAX_ERRORS if self.max_errors is None else self.max_errors

    def error_log_path(self) -> str | None:
        """Where failed samples are logged: ``error_log``, else ``DATALOADER_ERROR_LOG``."""
        return self.error_log or os.environ.get("DATALOADER_ERROR_LOG") or None

    @property
    def parallel(self) -> bool:
        """Whether batches are made by workers (a number of them, or "auto")."""
        return self.num_workers != 0

    @property
    def tune_workers(self) -> bool:
        """``num_workers="auto"``: the autotuner sizes the pool."""
        return self.num_workers == AUTO

    @property
    def tune_depth(self) -> bool:
        """The autotuner sets the prefetch depth: ``prefetch_factor="auto"``, or left unset
        with ``num_workers="auto"``."""
        return self.prefetch_factor == AUTO or (self.tune_workers and self.prefetch_factor is None)

    @property
    def messages_ahead(self) -> int:
        """Messages of tasks each worker may have outstanding (to start with, where tuned)."""
        return self.prefetch_factor if isinstance(self.prefetch_factor, int) else 2

    @property
    def fixed_group(self) -> int | None:
        """Tasks per message, or None where they are sized from measured batches."""
        if self.batches_per_message is not None:
            return self.batches_per_message
        return 1 if isinstance(self.prefetch_factor, int) else None

    def context(self) -> multiprocessing.context.BaseContext:
        """The multiprocessing context workers start from."""
        if self.multiprocessing_context is None:
            return multiprocessing.get_context()
        if isinstance(self.multiprocessing_context, str):
            return multiprocessing.get_context(self.multiprocessing_context)
        return self.multiprocessing_context


def _check_workers(value: Any, worker_type: str, too_many: str = "raise") -> int | str:
    if value == AUTO and isinstance(value, str):
        return AUTO
    if isinstance(value, str):
        raise ArgumentValueError(f"`num_workers` must be a non-negative integer or 'auto'; got {value!r}.")
    count = check_non_negative_int("num_workers", value, _AUTO_HINT)
    if count > 1:  # no limit is below 1: skip reading it
        limit, why = max_workers(worker_type)
        if count > limit and too_many == "raise":
            raise ArgumentValueError(f"`num_workers` must be at most {limit} here; got {count}: {why}.")
        if count > limit:
            warn_argument(
                f"This DataLoader will create {count} worker {_PLURALS[worker_type]} in total, more than the "
                f"{limit} this machine has room for: {why}. Please be aware that excessive worker "
                "creation might get DataLoader running slow or even freeze; lower num_workers, or "
                "pass too_many_workers=\"raise\" to have this refused."
            )
    return count


def _check_shm_budget(value: Any) -> int:
    budget = check_positive_int("shm_budget", value, "It is a number of bytes.")
    ceiling, what = shm_ceiling()
    if budget > ceiling:
        raise ArgumentValueError(
            f"`shm_budget` must be at most {ceiling} bytes ({ceiling / 2**30:.1f} GiB, {what}); "
            f"got {budget}. It is a number of bytes: the shared memory all workers together may "
            "keep, e.g. shm_budget=2 * 2**30 for 2 GiB."
        )
    return budget


def _check_hooks(hooks: Any) -> tuple:
    if hooks is None:
        return ()
    if not isinstance(hooks, (list, tuple)):
        hooks = (hooks,)
    for hook in hooks:
        if not all(callable(getattr(hook, name, None)) for name in ("before", "after", "failed")):
            raise ArgumentTypeError(
                f"each of `hooks` must have before(event), after(event) and failed(event, error) "
                f"methods (subclass dataloader.hooks.StageHook); got {type(hook).__name__}."
            )
    return tuple(hooks)


def _check_path(name: str, value: Any) -> str:
    if not isinstance(value, (str, os.PathLike)):
        raise ArgumentTypeError(f"`{name}` must be a file path; got {type(value).__name__}.")
    return os.fspath(value)


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
