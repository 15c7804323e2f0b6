"""The vision transforms inside a DataLoader: same batches for any number and kind of worker."""

import numpy as np
import pytest

import dataloader.transform.vision as V
from dataloader import ArrayDataset, DataLoader, RandomSampler

from ._support import same


def augmented_batches(num_workers, worker_type="process"):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (24, 40, 48, 3), dtype=np.uint8)
    boxes = np.tile(np.array([[4.0, 4.0, 30.0, 20.0]], np.float32), (24, 1, 1))
    transform = V.Compose(
        [V.RandomResizedCrop(24), V.RandomHorizontalFlip(), V.ColorJitter(0.3, 0.3, 0.3, 0.05),
         V.Normalize(128, 64), V.ToMode("CHW")],
        order=("image", "boxes"),
    )
    dataset = ArrayDataset(images, boxes)
    loader = DataLoader(
        dataset,
        sampler=RandomSampler(dataset, batch_size=4, seed=1),
        transform=transform,
        num_workers=num_workers,
        seed=7,
        worker_type=worker_type,
        timeout=60,
    )
    return [tuple(np.array(part, copy=True) for part in batch) for batch in loader]


@pytest.mark.parametrize("num_workers, worker_type", [(2, "thread"), (2, "process")])
def test_batches_do_not_depend_on_the_workers(num_workers, worker_type):
    serial = augmented_batches(0)
    assert serial[0][0].shape == (4, 3, 24, 24) and serial[0][0].dtype == np.float32
    assert same(augmented_batches(num_workers, worker_type), serial)
