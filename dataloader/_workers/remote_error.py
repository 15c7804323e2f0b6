"""A worker's exception, carried home whole and re-raised as its own type.

The re-raised object derives from the original exception type *and* from
:class:`WorkerError`, so ``except IndexError`` and ``except RuntimeError``
both catch it; its message names the worker, its pid, the sample indices and
the stage, followed by the original traceback. The first line starts as PyTorch's
and MegEngine's do (``Caught KeyError in DataLoader worker process 0``), so code
that matches their messages keeps working. A type that cannot be rebuilt
(not importable, or a layout that cannot be combined) becomes a plain
:class:`WorkerError` carrying the same text.

A ``BaseException`` that is not an ``Exception`` (``KeyboardInterrupt``, ``SystemExit``,
``GeneratorExit``) comes back as its own type alone, with that text as a note: combined with
:class:`WorkerError` it would become an ``Exception``, and ``except Exception`` would catch
what is meant to stop the program.
"""

from __future__ import annotations

import pickle
import traceback
from dataclasses import dataclass
from typing import Any

from ..errors import WorkerError

_combined: dict[type, type] = {}


@dataclass(frozen=True)
class RemoteError:
    """An exception captured in a worker, in a form that always pickles."""

    type_name: str
    exc_type: bytes | None  # the pickled class, or None when it does not pickle by reference
    args: bytes | None  # the pickled args, or None when they do not pickle
    init_args: bytes | None  # what __reduce__ rebuilds it from (OSError's filename, ...)
    state: bytes | None  # the pickled __dict__ (attributes set by __init__)
    traceback: str
    worker_id: int
    pid: int
    indices: list | None
    stage: str

    @classmethod
    def capture(
        cls, error: BaseException, worker_id: int, pid: int, indices: list | None, stage: str
    ) -> "RemoteError":
        return cls(
            type_name=type(error).__name__,
            exc_type=_dumps(type(error)),
            args=_dumps(error.args),
            init_args=_dumps(_init_args(error)),
            state=_dumps(getattr(error, "__dict__", None) or None),
            traceback="".join(traceback.format_exception(error)),
            worker_id=worker_id,
            pid=pid,
            indices=indices,
            stage=stage,
        )

    def message(self) -> str:
        where = f" while loading indices {_brief(self.indices)}" if self.indices is not None else ""
        return (
            f"Caught {self.type_name} in DataLoader worker process {self.worker_id} (pid {self.pid})"
            f"{where} (stage: {self.stage}).\nOriginal Traceback (most recent call last):\n"
            + self.traceback.split("\n", 1)[-1]
        )

    def rebuild(self) -> BaseException:
        """The exception to raise in the main process: a :class:`WorkerError` of the original
        type, or the original ``BaseException`` itself with the message as a note."""
        exc_type, args, init_args, state = (
            _loads(self.exc_type), _loads(self.args), _loads(self.init_args), _loads(self.state)
        )
        error = _not_an_exception(exc_type, args, init_args, state)
        if error is not None:
            error.add_note(f"{self.message().rstrip()}\n{not_a_bad_sample(error)}")
        else:
            error = _instantiate(exc_type, args, init_args, state, self.message())
        error.worker_id = self.worker_id
        error.pid = self.pid
        error.indices = self.indices
        error.original_traceback = self.traceback
        return error


def not_a_bad_sample(error: BaseException) -> str:
    """Why ``on_error`` let ``error`` (a ``BaseException`` that is not an ``Exception``) through."""
    name = type(error).__name__
    return (
        f"on_error does not skip or replace a sample that raises {name}: only an Exception marks a "
        f"bad sample, and {name} is not one (KeyboardInterrupt and SystemExit ask the program to stop)."
    )


def _brief(indices: list, shown: int = 16) -> str:
    if len(indices) <= shown:
        return str(list(indices))
    head = ", ".join(str(i) for i in indices[:shown])
    return f"[{head}, ... ({len(indices)} in all)]"


def _dumps(value: Any) -> bytes | None:
    try:
        return pickle.dumps(value)
    except Exception:
        return None


def _loads(data: bytes | None) -> Any:
    try:
        return pickle.loads(data) if data is not None else None
    except Exception:
        return None


def _init_args(error: BaseException) -> Any:
    try:
        reduced = error.__reduce_ex__(2)
        return tuple(reduced[1]) if reduced[0] is type(error) else error.args
    except Exception:
        return error.args


def _not_an_exception(exc_type: Any, args: Any, init_args: Any, state: Any) -> BaseException | None:
    """The original, when its type is a ``BaseException`` but not an ``Exception``; else None."""
    if not (isinstance(exc_type, type) and issubclass(exc_type, BaseException)) or issubclass(exc_type, Exception):
        return None
    ctor = init_args if init_args is not None else args
    try:
        error = exc_type(*(ctor or ()))
        if args is not None:
            error.args = tuple(args)
        if isinstance(state, dict):
            error.__dict__.update(state)
    except Exception:
        return None
    return error


def _instantiate(exc_type: Any, args: Any, init_args: Any, state: Any, message: str) -> WorkerError:
    combined = _combined_type(exc_type)
    if combined is not None:
        ctor = init_args if init_args is not None else args
        try:
            error = combined.__new__(combined, *(ctor or (message,)))
            try:
                exc_type.__init__(error, *(ctor or ()))
            except Exception:
                pass
            error.args = tuple(args) if args is not None else (message,)
            if isinstance(state, dict):
                error.__dict__.update(state)
            error._message = message
            return error
        except Exception:
            pass
    error = WorkerError(message)
    error._message = message
    return error


def _combined_type(exc_type: Any) -> type | None:
    if not (isinstance(exc_type, type) and issubclass(exc_type, Exception)):
        return None
    if issubclass(exc_type, WorkerError):
        return exc_type
    if exc_type not in _combined:
        try:
            _combined[exc_type] = type(
                exc_type.__name__,
                (exc_type, WorkerError),
                {"__str__": _message_str, "__module__": exc_type.__module__},
            )
        except TypeError:
            _combined[exc_type] = None
    return _combined[exc_type]


def _message_str(self: Any) -> str:
    return getattr(self, "_message", "")
