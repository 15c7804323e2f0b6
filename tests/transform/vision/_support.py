"""Helpers shared by the vision transform tests."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator

import numpy as np

from dataloader._local import using_batch_rng
from dataloader.transform.vision import IMAGE_BACKEND

FULL_ORDER = ("image", "boxes", "mask", "keypoints", "polygons", "boxes_category", "info")


@contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Install a generator seeded with ``seed`` as this thread's ``batch_rng()``."""
    with using_batch_rng(np.random.default_rng(seed)):
        yield


def run(transform: Any, sample: Any, seed: int = 0) -> Any:
    with seeded(seed):
        return transform.apply(sample)


def like_opencv(out: np.ndarray, expected: Callable[[Any], np.ndarray]) -> bool:
    """``out`` is what ``expected(cv2)`` computes: equal under the OpenCV backend, within one
    level under the NumPy one (docs/vision.md, "Without OpenCV"); true where cv2 is missing."""
    try:
        import cv2
    except ImportError:
        return True
    reference = np.asarray(expected(cv2))
    reference = reference[:, :, None] if reference.ndim == 2 and out.ndim == 3 else reference
    if IMAGE_BACKEND == "opencv":
        return np.array_equal(out, reference)
    return out.shape == reference.shape and int(np.abs(out.astype(np.int64) - reference).max()) <= 1


def noise_image(height: int = 48, width: int = 64, channels: int = 3, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (height, width, channels), dtype=np.uint8)


def full_sample(height: int = 48, width: int = 64) -> tuple:
    """An image with boxes, a mask, keypoints, polygons and passthrough fields."""
    image = noise_image(height, width)
    boxes = np.array([[4.0, 6.0, 20.0, 30.0], [10.0, 2.0, 40.0, 12.0]], dtype=np.float32)
    mask = np.zeros((height, width, 1), dtype=np.uint8)
    mask[6:30, 4:20] = 1
    keypoints = np.array([[[5.5, 7.5, 2.0], [18.5, 28.5, 1.0]]], dtype=np.float32)
    polygons = [[np.array([[4.0, 6.0], [20.0, 6.0], [20.0, 30.0]], dtype=np.float32)]]
    return image, boxes, mask, keypoints, polygons, np.array([1, 2]), {"path": "x.jpg"}


def mask_boxes(mask: np.ndarray) -> np.ndarray | None:
    """The continuous bounding box ``[x0, y0, x1, y1]`` of a mask's nonzero pixels."""
    rows = np.flatnonzero(mask.any(axis=(1, 2)))
    cols = np.flatnonzero(mask.any(axis=(0, 2)))
    if rows.size == 0:
        return None
    return np.array([cols[0], rows[0], cols[-1] + 1, rows[-1] + 1], dtype=np.float64)


def same(a: Any, b: Any) -> bool:
    """Nested equality of samples (arrays compared by dtype, shape and values)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def snapshot(sample: Any) -> Any:
    """A deep copy of a sample, to check that a transform left its input alone."""
    if isinstance(sample, np.ndarray):
        return sample.copy()
    if isinstance(sample, (list, tuple)):
        return type(sample)(snapshot(x) for x in sample)
    return sample


Factory = Callable[..., Any]
