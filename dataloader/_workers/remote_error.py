"""A worker's exception, carried home whole and re-raised as its own type.

The re-raised object derives from the original exception type *and* from
:class:`WorkerError`, so ``except IndexError`` and ``except RuntimeError``
both catch it; its message names the worker, its pid, the sample indices and
the stage, followed by the original traceback. A type that cannot be rebuilt
(not importable, or a layout that cannot be combined) becomes a plain
:class:`WorkerError` carrying the same text.
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
    exc_type: Any  # the class, or None when it does not pickle by reference
    args: Any  # the exception's args, or None when they do not pickle
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
            exc_type=_if_pickles(type(error)),
            args=_if_pickles(error.args),
            traceback="".join(traceback.format_exception(error)),
            worker_id=worker_id,
            pid=pid,
            indices=indices,
            stage=stage,
        )

    def message(self) -> str:
        where = f" while loading indices {_brief(self.indices)}" if self.indices is not None else ""
        return (
            f"Caught {self.type_name} in DataLoader worker {self.worker_id} (pid {self.pid})"
            f"{where} (stage: {self.stage}).\nOriginal Traceback (most recent call last):\n"
            + self.traceback.split("\n", 1)[-1]
        )

    def rebuild(self) -> WorkerError:
        """The exception to raise in the main process."""
        error = _instantiate(self.exc_type, self.args, self.message())
        error.worker_id = self.worker_id
        error.pid = self.pid
        error.indices = self.indices
        error.original_traceback = self.traceback
        return error


def _brief(indices: list, shown: int = 16) -> str:
    if len(indices) <= shown:
        return str(list(indices))
    head = ", ".join(str(i) for i in indices[:shown])
    return f"[{head}, ... ({len(indices)} in all)]"


def _if_pickles(value: Any) -> Any:
    try:
        pickle.loads(pickle.dumps(value))
    except Exception:
        return None
    return value


def _instantiate(exc_type: Any, args: Any, message: str) -> WorkerError:
    combined = _combined_type(exc_type)
    if combined is not None:
        try:
            error = combined.__new__(combined, *(args or (message,)))
            error.args = tuple(args) if args is not None else (message,)
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
