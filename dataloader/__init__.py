"""dataloader: batches for training loops, fast and robust.

MegEngine's ``megengine.data`` API on NumPy, with shared-memory workers.
"""

from .buffer import ThreadBuffer, buffer_iterator
from .callable_source import CallableSource
from .collator import Collator
from .dataset import ArrayDataset, Collated, ConcatDataset, Dataset, StreamDataset, batch_array
from .errors import (
    ArgumentTypeError,
    ArgumentValueError,
    CollateError,
    DataLoaderError,
    ImageDecodeError,
    LoaderTimeoutError,
    SharedMemoryError,
    WorkerDiedError,
    WorkerError,
)
from .image_folder import ImageFolder
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
from .monitor import Stats
from .rng import batch_rng
from .worker import WorkerInfo, get_worker_info

__all__ = [
    "ArgumentTypeError",
    "ArgumentValueError",
    "ArrayDataset",
    "CallableSource",
    "CollateError",
    "Collated",
    "Collator",
    "ConcatDataset",
    "DataLoader",
    "DataLoaderError",
    "Dataset",
    "ImageDecodeError",
    "ImageFolder",
    "Infinite",
    "LoaderTimeoutError",
    "MapSampler",
    "RandomSampler",
    "ReplacementSampler",
    "Sampler",
    "SequentialSampler",
    "SharedMemoryError",
    "Stats",
    "StreamDataset",
    "StreamSampler",
    "ThreadBuffer",
    "WorkerDiedError",
    "WorkerError",
    "WorkerInfo",
    "batch_array",
    "batch_rng",
    "buffer_iterator",
    "get_worker_info",
]
