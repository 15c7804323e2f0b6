"""The columnar bench's contenders: each opens its batches over one run's files.

A contender's ``open(files, workers)`` is a context manager giving an iterator of batches and
stopping whatever it started when the run ends. Our loaders and the plain scan go on epoch
after epoch; PyTorch's and Hugging Face's (``bounded``) give one epoch, of which the bench
times at most ``--batches`` batches.
"""

from __future__ import annotations

import gc
import importlib.util
from contextlib import closing, contextmanager
from dataclasses import dataclass
from typing import Any, Callable, ContextManager, Iterator

import pyarrow.parquet as pq

from dataloader import DataLoader, ImageFolder, RandomSampler, StreamSampler
from dataloader.columnar import ArrowDataset, ParquetStream

from .columnar_data import Crop, DecodeCrop, Files, TakeRows

TABULAR, RANDOM, IMAGES = "tabular stream", "random access", "image parquet"
PLAIN, OURS, TUNED, SERIAL, TORCH = (
    "plain scan", "ours stream", "ours stream, tuned: persistent, prefetch 4",
    "ours stream, 0 workers", "torch per-sample")
ARROW, HF = "ours ArrowDataset", "HF datasets"
FOLDER, PARQUET = "ImageFolder", "ours Parquet rows"
ROW_BATCH, IMAGE_BATCH = 1024, 32


@dataclass(frozen=True)
class Contender:
    workload: str
    name: str
    open: Callable[[Files, int], ContextManager[Iterator]]  # (files, workers) -> batches
    bounded: bool = False  # a slow peer: at most --batches batches, within its first epoch
    needs: str | None = None  # a module it cannot run without


def _epochs(loader: DataLoader) -> Iterator:
    """Our loader's batches, epoch after epoch; closing the generator stops the workers."""
    try:
        while True:
            with iter(loader) as batches:
                yield from batches
    finally:
        loader.close()


@contextmanager
def _ours(dataset: Any, sampler: Any, workers: int, **options: Any) -> Iterator[Iterator]:
    loader = DataLoader(dataset, sampler, num_workers=workers, **options)
    with closing(_epochs(loader)) as batches:
        yield batches


@contextmanager
def _torch(dataset: Any, workers: int, **options: Any) -> Iterator[Iterator]:
    import torch.utils.data

    batches = iter(torch.utils.data.DataLoader(dataset, batch_size=ROW_BATCH, num_workers=workers,
                                               **options))
    yield batches
    del batches  # its workers stop when it is collected
    gc.collect()


@contextmanager
def plain_scan(files: Files, workers: int) -> Iterator[Iterator]:
    def epochs() -> Iterator[dict]:
        while True:
            for batch in pq.ParquetFile(files.parquet).iter_batches(batch_size=ROW_BATCH):
                names = batch.schema.names
                yield {name: column.to_numpy() for name, column in zip(names, batch.columns)}

    yield epochs()


def ours_stream(workers: int, **options: Any) -> Callable[[Files, int], ContextManager[Iterator]]:
    def open(files: Files, _: int) -> ContextManager[Iterator]:
        return _ours(ParquetStream(files.parquet, batch_size=ROW_BATCH), StreamSampler(), workers,
                     parallel_stream=workers > 0, **options)

    return open


def torch_per_sample(files: Files, workers: int) -> ContextManager[Iterator]:
    # One chunk: on a table of many chunks (one per row group) take() concatenates them all
    # first, about 100 times slower per row here; the recipe should not be judged by that trap.
    return _torch(TakeRows(pq.read_table(files.parquet).combine_chunks()), workers)


def ours_arrow(files: Files, workers: int) -> ContextManager[Iterator]:
    dataset = ArrowDataset(files.arrow)
    return _ours(dataset, RandomSampler(dataset, batch_size=ROW_BATCH, seed=0), workers)


def hf_datasets(files: Files, workers: int) -> ContextManager[Iterator]:
    import datasets

    hf = datasets.Dataset.from_file(str(files.arrow_stream)).with_format("numpy")
    return _torch(hf, workers, shuffle=True)


def image_folder(files: Files, workers: int) -> ContextManager[Iterator]:
    dataset = ImageFolder(files.image_root)
    return _ours(dataset, RandomSampler(dataset, batch_size=IMAGE_BATCH, seed=0), workers,
                 transform=Crop())


def parquet_images(files: Files, workers: int) -> ContextManager[Iterator]:
    return _ours(ParquetStream(files.image_parquet), StreamSampler(batch_size=IMAGE_BATCH), workers,
                 transform=DecodeCrop(), parallel_stream=workers > 0)


def contenders(workers: int) -> tuple[Contender, ...]:
    return (
        Contender(TABULAR, PLAIN, plain_scan),
        Contender(TABULAR, OURS, ours_stream(workers)),
        Contender(TABULAR, TUNED, ours_stream(workers, persistent_workers=True, prefetch_factor=4)),
        Contender(TABULAR, SERIAL, ours_stream(0)),
        Contender(TABULAR, TORCH, torch_per_sample, bounded=True, needs="torch"),
        Contender(RANDOM, ARROW, ours_arrow),
        Contender(RANDOM, HF, hf_datasets, bounded=True, needs="datasets"),
        Contender(IMAGES, FOLDER, image_folder, needs="cv2"),
        Contender(IMAGES, PARQUET, parquet_images, needs="cv2"),
    )


def missing(contender: Contender) -> bool:
    """Whether a module the contender needs cannot be imported."""
    return contender.needs is not None and importlib.util.find_spec(contender.needs) is None
