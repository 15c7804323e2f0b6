"""The vision transforms inside a DataLoader: same batches for any number and kind of worker."""

import numpy as np
import pytest

import dataloader.transform.vision as V
from dataloader import ArrayDataset, DataLoader, RandomSampler, SequentialSampler
from dataloader.transform import BatchTransform

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


class CountBatches(BatchTransform):
    """A batch transform that records the shapes it sees (in the consumer's process)."""

    def __init__(self):
        self.shapes = []

    def apply(self, batch):
        self.shapes.append(tuple(part.shape for part in batch))
        return batch


def sequential_batches(dataset, transform, num_workers):
    loader = DataLoader(dataset, SequentialSampler(dataset, batch_size=4), transform=transform,
                        num_workers=num_workers, timeout=60)
    return [tuple(np.array(part, copy=True) for part in batch) for batch in loader]


@pytest.mark.parametrize("num_workers", [0, 2])
def test_batch_transform_ending_a_vision_compose_runs_once_per_batch(num_workers, no_leaks):
    images = np.arange(6 * 4 * 5 * 3, dtype=np.uint8).reshape(6, 4, 5, 3)
    count = CountBatches()
    batches = sequential_batches(ArrayDataset(images), V.Compose([V.Pad(1), count]), num_workers)
    assert [b[0].shape for b in batches] == [(4, 6, 7, 3), (2, 6, 7, 3)]
    assert count.shapes == [((4, 6, 7, 3),), ((2, 6, 7, 3),)]


@pytest.mark.parametrize("num_workers", [0, 2])
def test_batch_transform_ending_nested_vision_composes_is_lifted(num_workers, no_leaks):
    images = np.zeros((5, 4, 4, 1), np.uint8)
    count = CountBatches()
    inner = V.Compose([V.CenterCrop(2), V.Compose([V.ToMode(), count])])
    batches = sequential_batches(ArrayDataset(images), V.Compose([V.Pad(1), inner]), num_workers)
    assert count.shapes == [((4, 1, 2, 2),), ((1, 1, 2, 2),)]
    assert [b[0].shape for b in batches] == [(4, 1, 2, 2), (1, 1, 2, 2)]


@pytest.mark.parametrize("num_workers", [0, 2])
def test_vision_compose_keeps_its_order_for_the_per_sample_part(num_workers, no_leaks):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (6, 4, 5, 3), dtype=np.uint8)
    masks = images[..., :1].copy()
    count = CountBatches()
    transform = V.Compose([V.RandomHorizontalFlip(1.0), count], order=("image", "mask"))
    batches = sequential_batches(ArrayDataset(images, masks), transform, num_workers)
    flipped = np.concatenate([b[1] for b in batches])
    assert np.array_equal(flipped, masks[:, :, ::-1])  # the mask moved with the image
    assert count.shapes == [((4, 4, 5, 3), (4, 4, 5, 1)), ((2, 4, 5, 3), (2, 4, 5, 1))]
