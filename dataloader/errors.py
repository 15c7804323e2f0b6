"""The exception types users catch.

Argument errors subclass ``ValueError``/``TypeError`` so that code written for
MegEngine or PyTorch keeps catching them; runtime failures subclass
``RuntimeError`` (and ``TimeoutError`` for timeouts) for the same reason.
"""

from __future__ import annotations

from typing import Any


class DataLoaderError(Exception):
    """Base class of every error this library raises on purpose."""


class ArgumentValueError(DataLoaderError, ValueError):
    """An argument has the right type but a value that is not allowed."""


class ArgumentTypeError(DataLoaderError, TypeError):
    """An argument has a type that is not allowed."""


class CollateError(DataLoaderError, ValueError, TypeError, RuntimeError):
    """Samples cannot be combined into a batch (ragged shapes, mismatched keys, ...).

    A ``ValueError`` as NumPy's failed ``stack`` is, a ``TypeError`` as MegEngine's and
    PyTorch's collators raise for an unsupported type, and a ``RuntimeError`` as PyTorch's
    ``default_collate`` raises for ragged sequences and tensors, so each ``except`` keeps working.
    """


class WorkerError(DataLoaderError, RuntimeError):
    """An exception raised inside a worker, carried to the main process.

    When the original exception type can be rebuilt, the raised object is an
    instance of a class deriving from both that type and ``WorkerError``, so
    ``except IndexError`` and ``except WorkerError`` both catch it.
    """

    worker_id: int | None = None
    pid: int | None = None
    indices: list[int] | None = None
    original_traceback: str = ""


class WorkerDiedError(WorkerError):
    """A worker process exited without being asked to (killed, crashed, ``os._exit``)."""


class SampleError(DataLoaderError, ValueError):
    """A sample could not be made: the dataset or the transform returned None for it.

    Under ``on_error="skip"`` or ``"replace"`` such a sample counts as failed, like one whose
    fetch or transform raised (see docs/bad-samples.md).
    """


class TooManyBadSamplesError(DataLoaderError, RuntimeError):
    """More samples failed in an epoch than ``max_errors`` allows.

    ``failures`` holds the records of the first of them
    (:class:`~dataloader.SampleFailure`: index, stage, exception, worker).
    """

    failures: tuple[Any, ...] = ()


class LoaderTimeoutError(DataLoaderError, TimeoutError, RuntimeError):
    """No batch arrived within ``timeout`` seconds."""


class ImageDecodeError(DataLoaderError, OSError):
    """An image file exists but cannot be decoded (corrupt, truncated, not an image)."""


class ImageBackendError(DataLoaderError, ImportError):
    """The image library asked for (``DATALOADER_IMAGE_BACKEND``) or needed is not installed."""


class DataFileError(DataLoaderError, OSError):
    """A data file cannot be read as the dataset or stream was built on it: it is gone,
    truncated, corrupt, or no longer the file whose metadata the reader planned with.

    ``path`` names the file and ``unit`` the row group (Arrow: record batch) where known.
    """

    path: str = ""
    unit: int | None = None

    def __init__(self, message: str, path: str = "", unit: int | None = None) -> None:
        super().__init__(message)
        self.path, self.unit = path, unit

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (str(self), self.path, self.unit)


class SourceChangedError(DataFileError):
    """A file was replaced or rewritten after the reader read its metadata: reading on would
    lose or repeat rows without a word, so the reader stops and names the file."""


class RemoteReadError(DataFileError):
    """A request to object storage failed for good: retried ``attempts`` times where the error
    was transient (HTTP 5xx or 429, a reset connection, a timeout), or at once where it was not
    (a missing object, denied access). ``path`` names the object and ``cause`` the last error."""

    attempts: int = 0
    cause: str = ""

    def __init__(self, message: str, path: str = "", unit: int | None = None, *, attempts: int = 0, cause: str = "") -> None:
        super().__init__(message, path, unit)
        self.attempts, self.cause = attempts, cause

    def __reduce__(self) -> tuple[Any, ...]:
        return _remote_read_error, (str(self), self.path, self.unit, self.attempts, self.cause)


def _remote_read_error(message: str, path: str, unit: int | None, attempts: int, cause: str) -> RemoteReadError:
    return RemoteReadError(message, path, unit, attempts=attempts, cause=cause)


class CacheError(DataLoaderError, OSError):
    """The local cache of remote files (``cache_dir``) cannot take a copy: its disk is full,
    or the folder is not writable. The remote file is fine; ``directory`` names the folder."""

    directory: str = ""

    def __init__(self, message: str, directory: str = "") -> None:
        super().__init__(message)
        self.directory = directory

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (str(self), self.directory)


class SharedMemoryError(DataLoaderError, RuntimeError):
    """The shared-memory transport cannot get the room it needs."""


class ResourceLimitError(DataLoaderError, OSError):
    """A limit of the process is too low for what the loader must start: open files
    (``ulimit -n``, ``RLIMIT_NOFILE``) or address space (``ulimit -v``, ``RLIMIT_AS``).
    The message names the limit, what was needed and the fix."""


class RayDataError(DataLoaderError, RuntimeError):
    """Ray Data failed while producing a :class:`~dataloader.RayStream`'s batches.

    A task of the dataset's pipeline raised, or the cluster went away; Ray's own exception
    is the ``__cause__``, and its message is in this one's text.
    """


class ResumeWarning(UserWarning):
    """A resume that is exact only under a condition the loader cannot check: a sampler
    without ``state_dict()`` is iterated afresh and the batches handed out are skipped."""


class GILWarning(RuntimeWarning):
    """A free-threaded Python whose GIL an extension module turned back on: the loader's
    default workers are processes, not threads (shown once per process)."""


class FrameworkWarning(UserWarning):
    """A hint, shown once per process: the plain loader was given a ``torch.utils.data``
    dataset without ``framework=``, so its batches are NumPy arrays, not tensors."""
