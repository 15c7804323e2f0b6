"""The public API as users write it: ``mypy --strict`` must pass on this file (tests/test_typing.py).

It is type-checked, never run; each line is a habit the package's annotations must allow.
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np

import dataloader
from dataloader import (
    ArrayDataset,
    ArrowDataset,
    BucketSampler,
    CallableSource,
    Collator,
    ConcatDataset,
    DataLoader,
    DataLoaderError,
    Dataset,
    Infinite,
    LoaderTimeoutError,
    PackedStream,
    PackStats,
    PadCollator,
    ParquetStream,
    RandomSampler,
    ReplacementSampler,
    SequentialSampler,
    Stats,
    StreamDataset,
    StreamSampler,
    ThreadBuffer,
    WorkerError,
    WorkerInfo,
    batch_rng,
    buffer_iterator,
    get_worker_info,
    write_parquet_shards,
)
from dataloader.transform import BatchTransform, Compose, PseudoTransform, Transform
from dataloader.transform import vision as T


class Squares(Dataset):
    def __getitem__(self, index: int) -> tuple[np.ndarray, int]:
        return np.full((2, 2), index * index, dtype=np.float32), index

    def __len__(self) -> int:
        return 100


class Counter(StreamDataset):
    def __iter__(self) -> Iterator[dict[str, int]]:
        info: WorkerInfo | None = get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        return ({"value": i} for i in range(start, 1000, step))


class AddOne(Transform):
    def apply(self, input: Any) -> Any:
        image, label = input
        return image + 1, label


class Scale(BatchTransform):
    def apply_batch(self, inputs: Any) -> list[Any]:
        return [sample for sample in inputs]


class Stack(Collator):
    def apply(self, samples: Any) -> Any:
        return np.stack([sample[0] for sample in samples])


def train_step(images: np.ndarray, labels: np.ndarray) -> float:
    return float(images.mean() + labels.mean())


def epochs() -> None:
    data = np.arange(400, dtype=np.float32).reshape(100, 4)
    labels = np.arange(100)
    arrays = ArrayDataset(data, labels)
    assert len(arrays) == 100
    squares = Squares()
    both = ConcatDataset([arrays, squares])

    sampler = RandomSampler(squares, batch_size=8, drop_last=True, seed=0)
    sampler.set_epoch(1)
    batches_per_epoch: int = len(sampler)
    first: list[int] = next(iter(sampler))
    loader = DataLoader(
        squares,
        sampler,
        transform=Compose([AddOne(), PseudoTransform()]),
        collator=Collator(),
        num_workers=2,
        timeout=30,
        seed=0,
        persistent_workers=True,
    )
    loader.set_epoch(0)
    for images, label_batch in loader:
        train_step(images, label_batch)
    stats: Stats = loader.stats()
    print(stats.samples_per_second, stats.verdict, batches_per_epoch, first, len(loader), loader.batch_size)
    loader.close()

    for batch in DataLoader(arrays, SequentialSampler(arrays, batch_size=16)):
        train_step(batch[0], batch[1])
    for batch in DataLoader(both, Infinite(ReplacementSampler(both, batch_size=4)), epoch_size=3):
        print(batch)
    for batch in DataLoader(arrays, batch_size=32, shuffle=True, drop_last=False, collate_fn=Stack()):
        print(batch.shape)
    with iter(DataLoader(Counter(), StreamSampler(batch_size=10), num_workers=2, parallel_stream=True)) as it:
        print(next(it)["value"])
    for batch in DataLoader(squares, batch_size=4, transform=lambda sample: sample, collator=Scale()):
        print(batch)
    source = CallableSource(lambda batch_size: list(range(batch_size)))
    for batch in DataLoader(source, StreamSampler(batch_size=4), epoch_size=2):
        print(batch)


def tools(path: str) -> None:
    write_parquet_shards(ArrayDataset(np.zeros((10, 3))), path, rows_per_shard=5)
    table_loader = DataLoader(ArrowDataset(path), batch_size=4)
    stream_loader = DataLoader(ParquetStream(path, batch_size=4), StreamSampler(batch_size=4))
    for batch in ThreadBuffer(table_loader, buffer_size=2):
        print(batch)
    for batch in buffer_iterator(stream_loader, buffer_size=2):
        print(batch)
    noise = batch_rng().normal(size=3)
    print(noise, dataloader.__version__)


def images(folder: str) -> None:
    augment = T.Compose(
        [
            T.RandomResizedCrop(224),
            T.RandomHorizontalFlip(),
            T.ColorJitter(brightness=0.4, contrast=0.4),
            T.Normalize(mean=[103.5, 116.3, 123.7], std=[57.4, 57.1, 58.4]),
            T.ToMode("CHW"),
        ],
        order=("image", "category"),
    )
    photos = dataloader.ImageFolder(folder)
    for images, categories in DataLoader(photos, batch_size=32, shuffle=True, transform=augment, num_workers=2):
        print(images.shape, categories)


def padding(tokens: Dataset) -> None:
    collator = PadCollator({"input_ids": 0, "labels": -100}, multiple_of=8, fields=["input_ids", "labels"])
    for batch in DataLoader(tokens, batch_size=16, collator=collator, num_workers=2):
        print(batch["input_ids"].shape, batch["input_ids_lengths"])
    print(PadCollator(-1).apply([np.arange(3), np.arange(5)]).shape)


def buckets(tokens: Dataset, lengths: list[int]) -> None:
    sampler = BucketSampler(tokens, lengths, max_tokens=4096, seed=0, world_size=2, rank=0)
    sampler.set_epoch(1)
    for batch in DataLoader(tokens, sampler, num_workers=2):
        print(batch)
    print(len(sampler), sampler.batch_size, sampler.state_dict()["lengths"])


def packing(path: str) -> None:
    packed = PackedStream(ParquetStream(path), 2048, method="concat", fields=["ids"], seed=1, buffer_size=32)
    for batch in DataLoader(packed, StreamSampler(batch_size=8), num_workers=2):
        print(batch["ids"].shape, batch["ids_segment_ids"], batch["ids_positions"])
    stats: PackStats = packed.stats()
    print(stats.padding_fraction, stats.rows, packed.state_dict()["window"])


def errors() -> None:
    try:
        epochs()
    except LoaderTimeoutError as error:
        print("slow", error)
    except WorkerError as error:
        print(error.worker_id, error.original_traceback)
    except DataLoaderError:
        raise
