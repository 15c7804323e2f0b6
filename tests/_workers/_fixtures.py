"""Datasets, transforms, collators and worker hooks for the worker fault tests.

Everything a spawn or forkserver worker unpickles must be importable by name,
so it lives here at module level, never inside a test function. The child
scripts and the process helpers are in ``_scripts``.
"""

from __future__ import annotations

import ctypes
import errno
import faulthandler
import json
import multiprocessing
import os
import signal
import sys
import threading
import time
import types
import zlib
from typing import Any

import numpy as np

from dataloader import Collator, DataLoader, Dataset, SequentialSampler, get_worker_info
from dataloader.transform import Transform

# -- plain data ----------------------------------------------------------------


class Numbers(Dataset):
    """Sample ``i`` is ``np.array([i])``; ``delay`` seconds of work per sample (a slow disk)."""

    def __init__(self, n: int = 64, delay: float = 0.0) -> None:
        self.n = n
        self.delay = delay

    def __getitem__(self, index: int) -> np.ndarray:
        if self.delay:
            time.sleep(self.delay)
        return np.array([index])

    def __len__(self) -> int:
        return self.n


class GrowingBatches(Dataset):
    """Batch ``k`` (of 4 samples) holds 4 x (50,000 + 5,000 k) bytes: each batch is a little
    bigger than the one before, so a worker reaches into its segments' headroom."""

    def __len__(self) -> int:
        return 64

    def __getitem__(self, index: int) -> np.ndarray:
        return np.full(50_000 + 5_000 * (index // 4), index % 256, np.uint8)


def no_memory_to_grow(worker_id: int) -> None:
    """worker_init_fn: ``posix_fallocate`` fails with ENOSPC beyond the start of a file, as on a
    machine that runs out of memory after the worker's first segment was made."""
    real = os.posix_fallocate

    def fallocate(fd: int, offset: int, length: int) -> None:
        if offset > 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(fd, offset, length)

    os.posix_fallocate = fallocate


def loader_over(dataset: Any, method: str, batch_size: int = 4, num_workers: int = 2, **kwargs: Any) -> DataLoader:
    """A loader with ``num_workers`` workers started by ``method``, batches in index order."""
    return DataLoader(
        dataset,
        SequentialSampler(dataset, batch_size=batch_size),
        num_workers=num_workers,
        multiprocessing_context=method,
        **kwargs,
    )


def batch_of(index: int, batch_size: int = 4) -> list[int]:
    """The indices of the sequential batch that holds sample ``index``."""
    start = index - index % batch_size
    return list(range(start, start + batch_size))


# -- reports: what a worker tells the test just before its fault ----------------


def write_report(path: str) -> None:
    """Record this worker's id, pid and the (system-wide monotonic) time of the fault."""
    info = get_worker_info()
    report = {"worker_id": info.id if info else None, "pid": os.getpid(), "time": time.monotonic()}
    with open(path, "w") as file:
        json.dump(report, file)


def read_report(path: str | os.PathLike) -> dict:
    with open(path) as file:
        return json.load(file)


class WhoLoads(Numbers):
    """Sample ``i`` is ``np.array([i, id of the worker that loaded it])``."""

    def __getitem__(self, index: int) -> np.ndarray:
        sample = super().__getitem__(index)
        return np.array([int(sample[0]), get_worker_info().id])


class FailsToUnpickle(Numbers):
    """A dataset that cannot be rebuilt in a spawn or forkserver worker (a file it reopens on
    unpickling is missing there, say)."""

    def __setstate__(self, state: dict) -> None:
        raise FileNotFoundError(f"cannot reopen /data/index.db in pid {os.getpid()}")


class UnpicklableTransform(Transform):
    """A transform whose unpickling fails in the worker."""

    def __init__(self) -> None:
        self.weights = "model.pt"  # some state, or pickle never calls __setstate__

    def apply(self, sample: Any) -> Any:
        return sample

    def __setstate__(self, state: dict) -> None:
        raise ValueError("this transform's model weights are not on the worker's machine")


class SlowToUnpickle(Numbers):
    """A dataset that takes a while to arrive in a worker (it opens files on unpickling, say).

    It says so on stdout as it starts, so a test can act while a worker is still booting.
    """

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        emit({"booting": os.getpid()})
        threading.Event().wait(5.0)


# -- a worker that dies --------------------------------------------------------


def die(how: str) -> None:
    """End this process the way ``how`` says, from inside the dataset."""
    if how == "SIGKILL":
        os.kill(os.getpid(), signal.SIGKILL)
    elif how == "SIGSEGV":
        faulthandler.disable()  # the crash is the point: no fatal-error dump in the test's log
        ctypes.string_at(0)  # a real segmentation fault, as a broken C extension makes
    elif how == "exit3":
        os._exit(3)
    raise AssertionError(f"still alive after {how}")


class DieAt(Dataset):
    """Like :class:`Numbers`, but the worker that loads sample ``index`` dies (see :func:`die`)."""

    def __init__(self, n: int, index: int, how: str, report: str) -> None:
        self.n, self.index, self.how, self.report = n, index, how, report

    def __getitem__(self, index: int) -> np.ndarray:
        if index == self.index:
            write_report(self.report)
            die(self.how)
        return np.array([index])

    def __len__(self) -> int:
        return self.n


# -- a worker that hangs -------------------------------------------------------


def stuck_inside_dataset_forever() -> None:
    """Block for good, as a dataset reading from a dead network mount does."""
    threading.Event().wait()


class StuckAt(Dataset):
    """Like :class:`Numbers`, but loading sample ``index`` never returns."""

    def __init__(self, n: int, index: int, report: str) -> None:
        self.n, self.index, self.report = n, index, report

    def __getitem__(self, index: int) -> np.ndarray:
        if index == self.index:
            write_report(self.report)
            stuck_inside_dataset_forever()
        return np.array([index])

    def __len__(self) -> int:
        return self.n


class StuckFrom(Dataset):
    """Like :class:`Numbers`, but every sample from ``start`` on hangs, after a line on stdout."""

    def __init__(self, n: int, start: int) -> None:
        self.n, self.start = n, start

    def __getitem__(self, index: int) -> np.ndarray:
        if index >= self.start:
            emit({"stuck": os.getpid()})
            stuck_inside_dataset_forever()
        return np.array([index])

    def __len__(self) -> int:
        return self.n


# -- a worker that raises ------------------------------------------------------


class CorruptShardError(OSError):
    """An OSError subclass a dataset might define."""


class NeedsCode(Exception):
    """An exception whose constructor requires a keyword-only argument."""

    def __init__(self, message: str, *, code: int) -> None:
        super().__init__(message)
        self.code = code


def _where() -> str:
    info = get_worker_info()
    return f"worker {info.id if info else None}, pid {os.getpid()}"


def raise_kind(kind: str, index: int) -> None:
    """Raise the exception named ``kind`` for sample ``index``."""
    where = _where()
    if kind == "IndexError":
        raise IndexError(f"sample {index} is past the end ({where})")
    if kind == "KeyError":
        raise KeyError(f"missing-key-{index}")
    if kind == "UnicodeDecodeError":
        b"ok \xff".decode("utf-8")
    if kind == "CorruptShardError":
        raise CorruptShardError(errno.EIO, f"corrupt shard ({where})", f"/data/shard-{index}.bin")
    if kind == "NeedsCode":
        raise NeedsCode(f"bad record {index} ({where})", code=42)
    if kind == "WorkerOnlyModule":
        raise_worker_only_type(f"bad header in sample {index} ({where})")
    if kind == "LocalClass":
        raise_local_class(f"bad footer in sample {index} ({where})")
    if kind == "UnpicklableArgs":
        raise ValueError(f"sample {index} ({where})", threading.Lock())
    raise AssertionError(f"unknown kind {kind}")


WORKER_ONLY_MODULE = "dataloader_tests_worker_only_module"


def raise_worker_only_type(message: str) -> None:
    """Raise an instance of a class whose module exists only in this (worker) process."""
    module = sys.modules.get(WORKER_ONLY_MODULE)
    if module is None:
        module = types.ModuleType(WORKER_ONLY_MODULE)
        exec("class ShardHeaderError(Exception):\n    pass\n", module.__dict__)
        sys.modules[WORKER_ONLY_MODULE] = module
    raise module.ShardHeaderError(message)


def raise_local_class(message: str) -> None:
    """Raise an instance of a class that cannot be pickled (it is local to this function)."""

    class LocalFooterError(Exception):
        pass

    raise LocalFooterError(message)


class RaiseAt(Dataset):
    """Like :class:`Numbers`, but loading sample ``index`` raises ``kind`` (see :func:`raise_kind`)."""

    def __init__(self, n: int, index: int, kind: str = "IndexError") -> None:
        self.n, self.index, self.kind = n, index, kind

    def __getitem__(self, index: int) -> np.ndarray:
        if index == self.index:
            raise_kind(self.kind, index)
        return np.array([index])

    def __len__(self) -> int:
        return self.n


class FailingTransform(Transform):
    """Raises ValueError on the sample whose value is ``bad``."""

    def __init__(self, bad: int) -> None:
        self.bad = bad

    def apply(self, input: Any) -> Any:
        if int(input[0]) == self.bad:
            raise ValueError(f"cannot augment sample {self.bad} ({_where()})")
        return input


class FailingCollator(Collator):
    """Raises ZeroDivisionError on the batch that holds value ``bad``."""

    def __init__(self, bad: int) -> None:
        self.bad = bad

    def apply(self, samples: Any) -> Any:
        if any(int(s[0]) == self.bad for s in samples):
            raise ZeroDivisionError(f"cannot normalise the batch of sample {self.bad} ({_where()})")
        return super().apply(samples)


def failing_worker_init(worker_id: int) -> None:
    raise ValueError(f"cannot open the database in worker {worker_id} (pid {os.getpid()})")


class CountsReads(Numbers):
    """Counts its reads in a ``multiprocessing.Value`` and holds a ``Semaphore``: objects that
    multiprocessing lets a spawned child inherit, though plain pickle refuses them."""

    def __init__(self, size: int, method: str) -> None:
        super().__init__(size)
        context = multiprocessing.get_context(method)
        self.reads = context.Value("i", 0, lock=True)
        self.gate = context.Semaphore(1)

    def __getitem__(self, index: int) -> np.ndarray:
        with self.gate, self.reads.get_lock():
            self.reads.value += 1
        return super().__getitem__(index)


# -- things that do not pickle (for the spawn/forkserver up-front check) --------


class HoldsLambdaDataset(Numbers):
    def __init__(self) -> None:
        super().__init__(8)
        self.key = lambda x: x


class HoldsLambdaTransform(Transform):
    def __init__(self) -> None:
        self.fn = lambda x: x

    def apply(self, input: Any) -> Any:
        return self.fn(input)


class HoldsLambdaCollator(Collator):
    def __init__(self) -> None:
        self.fn = lambda x: x


# -- shared-memory lifetime ----------------------------------------------------

IMAGE_SHAPE = (3, 64, 64)


def pattern(index: int, shape: tuple = IMAGE_SHAPE) -> np.ndarray:
    """The image of sample ``index``: distinct for every sample."""
    flat = (np.arange(int(np.prod(shape)), dtype=np.uint32) * 7 + index * 31) % 251
    return flat.astype(np.uint8).reshape(shape)


class PatternImages(Dataset):
    """Sample ``i`` is ``{"index": i, "image": pattern(i)}``."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __getitem__(self, index: int) -> dict:
        return {"index": index, "image": pattern(index)}

    def __len__(self) -> int:
        return self.n


class ChecksumCollator(Collator):
    """Adds the CRC-32 of the collated images, computed in the worker on the bytes it sends."""

    def apply(self, samples: Any) -> dict:
        batch = super().apply(samples)
        batch["crc"] = zlib.crc32(batch["image"])
        return batch


# -- talking to the test from a child script ------------------------------------


def emit(record: dict) -> None:
    """One JSON line on stdout, in one write (workers share the script's stdout)."""
    os.write(1, (json.dumps(record) + "\n").encode())
