"""Datasets for the recovery tests: samples that kill the worker process reading them.

Module level, so that spawn and forkserver workers (and probes) can unpickle them.
"""

from __future__ import annotations

import ctypes
import faulthandler
import os
import signal

import numpy as np

from dataloader import Dataset, get_worker_info


class Killers(Dataset):
    """0..n-1; reading a sample of ``kills`` in a worker ends that process (``how``: a real
    segmentation fault or an abort, as a broken decoder does; "SIGKILL", as the OOM killer
    does; "exit", ``os._exit(3)``). In the main process it raises instead, so that a serial run
    shows the batches a killed sample must give."""

    def __init__(self, n: int, kills: dict[int, str]) -> None:
        self.n, self.kills = n, kills

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> np.ndarray:
        how = self.kills.get(index)
        if how is not None:
            if get_worker_info() is None:
                raise OSError(f"sample {index} is corrupt")
            faulthandler.disable()  # the crash is the point: no fatal-error dump in the log
            if how == "SIGSEGV":
                ctypes.string_at(0)
            if how == "SIGKILL":
                os.kill(os.getpid(), signal.SIGKILL)
            if how == "exit":
                os._exit(3)
            os.abort()
        return np.array([index, index * index])


class KillInTransform:
    """A per-sample transform that aborts its process on the samples of ``kills``."""

    def __init__(self, kills: set[int]) -> None:
        self.kills = kills

    def apply(self, sample: np.ndarray) -> np.ndarray:
        if int(sample[0]) in self.kills:
            if get_worker_info() is None:
                raise ValueError(f"sample {int(sample[0])} cannot be transformed")
            faulthandler.disable()
            os.abort()
        return sample + 1
