"""The small-sample workloads' datasets: a few Python or NumPy scalars per row, the shape of
token ids, tabular rows and labels, where per-sample and per-batch overhead is all there is.

Every sample is made on the fly from its index (no big Python lists to copy into workers),
so the plain loop, PyTorch's loader and ours pay the same for ``dataset[i]``.
"""

from __future__ import annotations

import numpy as np

from dataloader import Dataset

_TAGS = ("train", "valid", "test", "extra")


class _Sized(Dataset):
    """``size`` samples, each made from its index by ``__getitem__``."""

    def __init__(self, size: int = 2_000_000) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size


class ScalarsDataset(_Sized):
    """(int, float): Python scalars, as a token id and its weight."""

    def __getitem__(self, index: int) -> tuple:
        return index % 1000, (index % 997) * 0.25


class RecordDataset(_Sized):
    """A dict of an int, a float, a bool and a short string: one row of a table."""

    def __getitem__(self, index: int) -> dict:
        return {"id": index, "score": (index % 997) * 0.25, "flag": index % 3 == 0,
                "tag": _TAGS[index % 4]}


class VectorDataset(_Sized):
    """(float32[16], numpy int64 label): a small feature vector from a pool, a NumPy scalar."""

    def __init__(self, size: int = 2_000_000, pool: int = 4096) -> None:
        super().__init__(size)
        self.pool = np.random.default_rng(7).standard_normal((pool, 16), dtype=np.float32)
        self.labels = np.arange(pool, dtype=np.int64) % 1000

    def __getitem__(self, index: int) -> tuple:
        row = index % len(self.pool)
        return self.pool[row], self.labels[row]
