"""dataloader: batches for training loops, fast and robust.

MegEngine's ``megengine.data`` API on NumPy, with shared-memory workers.
"""

__version__ = "0.1.0"

from typing import TYPE_CHECKING

from .buffer import ThreadBuffer, buffer_iterator
from .bucket_sampler import BucketSampler
from .callable_source import CallableSource
from .collator import Collator
from .dataset import ArrayDataset, Collated, ConcatDataset, Dataset, StreamDataset, batch_array
from .errors import (
    ArgumentTypeError,
    ArgumentValueError,
    CacheError,
    CollateError,
    DataFileError,
    DataLoaderError,
    FrameworkWarning,
    GILWarning,
    ImageBackendError,
    ImageDecodeError,
    LoaderTimeoutError,
    RayDataError,
    RemoteReadError,
    ResourceLimitError,
    ResumeWarning,
    SampleError,
    SharedMemoryError,
    SourceChangedError,
    TooManyBadSamplesError,
    WorkerDiedError,
    WorkerError,
)
from ._stages.bad_samples import SampleFailure
from .hooks import StageEvent, StageHook
from .image_folder import ImageFolder
from .loader import DataLoader
from .mixing import MixedStream, WeightSchedule
from .packing import PackStats, PackedStream
from .pad_collator import PadCollator
from .sampler import (
    Infinite,
    MapSampler,
    RandomSampler,
    ReplacementSampler,
    Sampler,
    SequentialSampler,
    StreamSampler,
)
from .monitor import Stats, TuningChange
from .rank_states import gather_states, load_rank_states, save_rank_state
from .rng import batch_rng
from .worker import WorkerInfo, get_worker_info

if TYPE_CHECKING:  # for type checkers only: at run time, __getattr__ below imports these lazily
    from .columnar import (
        ArrowDataset,
        ArrowStream,
        ParquetDataset,
        ParquetStream,
        TarStream,
        write_parquet_shards,
        write_tar_shards,
    )
    from .raydata import RayStream

# dataloader.columnar imports pyarrow: its names load on first use, so `import dataloader`
# (and every spawned worker) does not pay for it.
_COLUMNAR = (
    "ArrowDataset", "ArrowStream", "ParquetDataset", "ParquetStream", "TarStream", "write_parquet_shards",
    "write_tar_shards",
)
# dataloader.raydata likewise; it imports ray itself only when a RayStream is built.
_RAYDATA = ("RayStream",)


def __getattr__(name: str) -> object:
    if name in _COLUMNAR:
        from . import columnar

        return getattr(columnar, name)
    if name in _RAYDATA:
        from . import raydata

        return getattr(raydata, name)
    raise AttributeError(f"module 'dataloader' has no attribute {name!r}")


__all__ = [
    "ArgumentTypeError",
    "ArgumentValueError",
    "ArrayDataset",
    "ArrowDataset",
    "ArrowStream",
    "BucketSampler",
    "CacheError",
    "CallableSource",
    "CollateError",
    "Collated",
    "Collator",
    "ConcatDataset",
    "DataFileError",
    "DataLoader",
    "DataLoaderError",
    "Dataset",
    "FrameworkWarning",
    "GILWarning",
    "ImageBackendError",
    "ImageDecodeError",
    "ImageFolder",
    "Infinite",
    "LoaderTimeoutError",
    "MapSampler",
    "MixedStream",
    "PackStats",
    "PackedStream",
    "PadCollator",
    "ParquetDataset",
    "ParquetStream",
    "RandomSampler",
    "RayDataError",
    "RayStream",
    "RemoteReadError",
    "ReplacementSampler",
    "ResourceLimitError",
    "ResumeWarning",
    "SampleError",
    "SampleFailure",
    "Sampler",
    "SequentialSampler",
    "SharedMemoryError",
    "SourceChangedError",
    "StageEvent",
    "StageHook",
    "Stats",
    "StreamDataset",
    "StreamSampler",
    "TarStream",
    "ThreadBuffer",
    "TooManyBadSamplesError",
    "TuningChange",
    "WeightSchedule",
    "WorkerDiedError",
    "WorkerError",
    "WorkerInfo",
    "batch_array",
    "batch_rng",
    "buffer_iterator",
    "gather_states",
    "get_worker_info",
    "load_rank_states",
    "save_rank_state",
    "write_parquet_shards",
    "write_tar_shards",
]
