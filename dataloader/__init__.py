"""dataloader: batches for training loops, fast and robust.

MegEngine's ``megengine.data`` API on NumPy, with shared-memory workers.
"""

from .collator import Collator
from .dataset import ArrayDataset, ConcatDataset, Dataset, StreamDataset
from .errors import (
    ArgumentTypeError,
    ArgumentValueError,
    CollateError,
    DataLoaderError,
    LoaderTimeoutError,
    SharedMemoryError,
    WorkerDiedError,
    WorkerError,
)
from .loader import DataLoader
from .sampler import (
    Infinite,
    MapSampler,
    RandomSampler,
    ReplacementSampler,
    Sampler,
    SequentialSampler,
    StreamSampler,
)
from .worker import WorkerInfo, get_worker_info

__all__ = [
    "ArgumentTypeError",
    "ArgumentValueError",
    "ArrayDataset",
    "CollateError",
    "Collator",
    "ConcatDataset",
    "DataLoader",
    "DataLoaderError",
    "Dataset",
    "Infinite",
    "LoaderTimeoutError",
    "MapSampler",
    "RandomSampler",
    "ReplacementSampler",
    "Sampler",
    "SequentialSampler",
    "SharedMemoryError",
    "StreamDataset",
    "StreamSampler",
    "WorkerDiedError",
    "WorkerError",
    "WorkerInfo",
    "get_worker_info",
]
