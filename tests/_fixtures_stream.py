"""Module-level datasets and jobs for the stream-tool tests (importable by spawned workers)."""

import time

import numpy as np

from dataloader import StreamDataset, get_worker_info


class Counted(StreamDataset):
    """0..n-1; with workers, each worker takes every num_workers-th value. Counts how often it restarts."""

    def __init__(self, n):
        self.n = n
        self.opened = 0

    def __iter__(self):
        self.opened += 1
        info = get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(np.arange(start, self.n, step, dtype=np.int64))


def slow_job(value, delay):
    time.sleep(delay)
    return np.int64(value)


class Jobs:
    """A replay-buffer stand-in: batch k's jobs make k*100 + position; early jobs are the slowest."""

    def __init__(self):
        self.calls = 0

    def __call__(self, batch_size):
        import functools

        self.calls += 1
        base = self.calls * 100
        return [functools.partial(slow_job, base + i, 0.02 * (batch_size - i) / batch_size) for i in range(batch_size)]


class Samples:
    """A source that returns ready samples (dicts), collated directly."""

    def __init__(self):
        self.calls = 0

    def __call__(self, batch_size):
        self.calls += 1
        return [{"x": np.float32(self.calls), "i": np.int64(i)} for i in range(batch_size)]
