"""Datasets, transforms and hooks for the executor tests.

Everything here is module-level so that it pickles by reference: the spawn
and forkserver start methods import this module in each worker. Anything a
test needs to observe from inside a worker goes through a file whose lines
are appended with one ``write`` on an ``O_APPEND`` descriptor (atomic for
short lines, so several processes may log to one file safely).
"""

from __future__ import annotations

import os
import random
import time
from collections import namedtuple
from typing import Any, Iterator

import numpy as np

from dataloader import Dataset, StreamDataset, batch_rng, get_worker_info
from dataloader.transform import Transform

Point = namedtuple("Point", ["xy", "weight"])


# -- logging from any process --------------------------------------------------


def append_line(path: str, line: str) -> None:
    """Append ``line`` to ``path`` in one atomic write."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def read_lines(path: str) -> list[str]:
    try:
        with open(path) as f:
            return [line.rstrip("\n") for line in f if line.strip()]
    except FileNotFoundError:
        return []


# -- map datasets --------------------------------------------------------------


def parallel_executor(iterator: Any) -> Any:
    """The parallel executor under an epoch's consumer-side stages."""
    stage = iterator.upstream
    while not hasattr(stage, "_pool"):
        stage = stage.upstream
    return stage


def settled_batches(log: str, batch_size: int, quiet: float = 0.5, limit: float = 10.0) -> set[int]:
    """The batches whose first sample a :class:`LoggingDataset` logged, once the log has
    stopped growing for ``quiet`` s (at most ``limit`` s)."""
    deadline = time.monotonic() + limit
    last, since = None, time.monotonic()
    while time.monotonic() < deadline:
        now = {int(line.split()[0]) // batch_size for line in read_lines(log)}
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            break
        time.sleep(0.02)
    return last or set()


class NestedDataset(Dataset):
    """Sample ``i``: a dict holding an image, a tuple with a namedtuple inside, a label and a name.

    The content is a pure function of ``i``; ``image_shape`` sets the bulk of a
    sample, so 4 samples of (3, 8, 8) take the inline path and 32 of (3, 64, 64)
    the shared-memory path.
    """

    def __init__(self, length: int, image_shape: tuple[int, ...] = (3, 8, 8)) -> None:
        self.length = length
        self.image_shape = tuple(image_shape)

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> dict:
        rng = np.random.default_rng(index)
        return {
            "image": rng.integers(0, 256, self.image_shape, dtype=np.uint8),
            "meta": (
                index,
                np.float32(index) / 2,
                Point(np.arange(3, dtype=np.int16) + index, np.float64(index) * 0.25),
            ),
            "label": np.int64(index % 7),
            "name": f"sample-{index}",
        }


class PidDataset(NestedDataset):
    """A :class:`NestedDataset` sample plus the pid of the process that read it."""

    def __getitem__(self, index: int) -> dict:
        return {**super().__getitem__(index), "pid": os.getpid()}


def wait_for_gate(gate: str, limit: float) -> None:
    """Return once the file ``gate`` exists, or after ``limit`` seconds. Polls: the test
    process opens the gate, and a file is what every start method's workers can see."""
    deadline = time.monotonic() + limit
    while not os.path.exists(gate) and time.monotonic() < deadline:
        time.sleep(0.01)


class LoggingNestedDataset(NestedDataset):
    """A :class:`NestedDataset` that appends ``"<index> <pid>"`` to ``log`` for every sample read.

    Sample ``gated_index`` first waits (at most 20 s) until the file ``gate`` exists.
    """

    def __init__(
        self, length: int, image_shape: tuple[int, ...], log: str, gate: str = "", gated_index: int = -1
    ) -> None:
        super().__init__(length, image_shape)
        self.log = log
        self.gate = gate
        self.gated_index = gated_index

    def __getitem__(self, index: int) -> dict:
        if index == self.gated_index:
            wait_for_gate(self.gate, 20.0)
        append_line(self.log, f"{index} {os.getpid()}")
        return super().__getitem__(index)


class IndexDataset(Dataset):
    """Sample ``i`` is ``{"index": i}``: all other content comes from the transform."""

    def __init__(self, length: int) -> None:
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> dict:
        return {"index": index}


class LoggingDataset(Dataset):
    """Appends ``"<index> <pid>"`` to ``log`` for every sample read, then returns the index."""

    def __init__(self, length: int, log: str) -> None:
        self.length = length
        self.log = log

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> dict:
        append_line(self.log, f"{index} {os.getpid()}")
        return {"index": index}


class GatedDataset(Dataset):
    """Sample ``gated_index`` waits until the file ``gate`` exists (at most ``limit`` s).

    The test opens the gate only after it has received another batch, so the
    batch holding the gated sample cannot be finished first: a deterministic
    "slow batch" that needs no timing assumption.
    """

    def __init__(self, length: int, gate: str, gated_index: int = 0, limit: float = 20.0) -> None:
        self.length = length
        self.gate = gate
        self.gated_index = gated_index
        self.limit = limit

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> dict:
        if index == self.gated_index:
            wait_for_gate(self.gate, self.limit)
        return {"index": index}


class WhoAmIDataset(Dataset):
    """Sample ``i``: the index, the pid that read it and what ``get_worker_info()`` said there."""

    def __init__(self, length: int) -> None:
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> dict:
        return {"index": index, "pid": os.getpid(), **describe_worker(self)}


def describe_worker(dataset: Any) -> dict:
    """``get_worker_info()`` as plain numbers (``-1`` everywhere when it is None)."""
    info = get_worker_info()
    if info is None:
        return {"id": -1, "num_workers": -1, "seed": -1, "idx": -1, "worker": -1,
                "same_dataset": 0, "frozen": 0}
    try:
        info.id = 99  # type: ignore[misc]
        frozen = 0
    except AttributeError:  # dataclasses.FrozenInstanceError
        frozen = 1
    return {
        "id": info.id,
        "num_workers": info.num_workers,
        "seed": info.seed,
        "idx": info.idx,
        "worker": info.worker,
        "same_dataset": int(info.dataset is dataset),
        "frozen": frozen,
    }


# -- stream datasets -----------------------------------------------------------


class RangeStream(StreamDataset):
    """Yields samples ``0 .. length - 1`` (dicts with a small array), recording the reader's pid."""

    def __init__(self, length: int) -> None:
        self.length = length

    def __iter__(self) -> Iterator[dict]:
        reader = os.getpid()
        for i in range(self.length):
            yield {"index": i, "values": np.full(3, i, dtype=np.float32), "reader": reader}


class CountingStream(StreamDataset):
    """Yields ``{"index": i}`` and counts in ``yielded`` how many samples it gave (main process only)."""

    def __init__(self, length: int) -> None:
        self.length = length
        self.yielded = 0

    def __iter__(self) -> Iterator[dict]:
        for i in range(self.length):
            self.yielded += 1
            yield {"index": i}


class ShardedStream(StreamDataset):
    """Yields ``range(id, length, num_workers)`` in a worker, ``range(length)`` in the main process."""

    def __init__(self, length: int) -> None:
        self.length = length

    def __iter__(self) -> Iterator[dict]:
        info = get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        for i in range(start, self.length, step):
            yield {"index": i, "pid": os.getpid(), **describe_worker(self)}


# -- transforms ----------------------------------------------------------------


class RandomAugment(Transform):
    """Draws from ``random`` and ``numpy.random``: the batch shows each generator's state."""

    def apply(self, sample: dict) -> dict:
        return {
            "index": sample["index"],
            "py": random.random(),
            "np": np.random.random(4),
        }


class RngAugment(Transform):
    """Draws from :func:`dataloader.batch_rng` (the per-batch generator, right for thread workers too)."""

    def apply(self, sample: dict) -> dict:
        return {"index": sample["index"], "rng": batch_rng().random(4)}


class PidTransform(Transform):
    """Adds the pid of the process that ran the transform and its worker id (-1: main process)."""

    def apply(self, sample: dict) -> dict:
        info = get_worker_info()
        return {**sample, "transform_pid": os.getpid(), "transform_worker": -1 if info is None else info.id}


class ArrowCollator:
    """Collates ``{"index", "image"}`` samples into ``{"table": pyarrow.Table, "image": array}``."""

    def apply(self, samples: list) -> dict:
        import pyarrow as pa

        index = np.array([s["meta"][0] for s in samples], dtype=np.int64)
        names = [s["name"] for s in samples]
        table = pa.table({"index": index, "name": names, "pixels": [s["image"].ravel().tolist()[:64] for s in samples]})
        return {"table": table, "image": np.stack([s["image"] for s in samples])}


# -- worker_init_fn ------------------------------------------------------------


def record_init(log: str, worker_id: int) -> None:
    """A ``worker_init_fn`` (bind ``log`` with functools.partial)."""
    info = get_worker_info()
    info_id = -1 if info is None else info.id
    append_line(log, f"{worker_id} {os.getpid()} {info_id}")
