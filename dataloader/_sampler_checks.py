"""The checks of a sampler's arguments: a dataset with a length, indices within it, weights."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._validate import check_len
from .errors import ArgumentTypeError, ArgumentValueError


def dataset_len(dataset: Any) -> int:
    """Return ``len(dataset)``, or raise if it has none, an invalid one, or is empty."""
    size = check_len("dataset", dataset)
    if size is None:
        raise ArgumentTypeError(
            f"`dataset` must have a length (a map-style Dataset); got {type(dataset).__name__}. "
            "A StreamDataset goes with StreamSampler."
        )
    if size == 0:
        raise ArgumentValueError("`dataset` must not be empty; got a dataset of length 0.")
    return size


def check_indices(indices: Any, dataset: Any) -> np.ndarray | None:
    """Return ``indices`` as a non-empty 1-D int64 array within the dataset, or None."""
    size = dataset_len(dataset)
    if indices is None:
        return None
    arr = np.asarray(indices)
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise ArgumentTypeError(
            f"`indices` must be a 1-D sequence of integers; got {type(indices).__name__} "
            f"of shape {arr.shape} and dtype {arr.dtype}."
        )
    if arr.size == 0:
        raise ArgumentValueError("`indices` must not be empty; got an empty sequence.")
    bad = arr[(arr < 0) | (arr >= size)]
    if bad.size:
        raise ArgumentValueError(
            f"`indices` must lie in [0, {size}) (the dataset's length); got {bad[0]}."
        )
    return arr.astype(np.int64)


def check_weights(weights: Any, size: int) -> np.ndarray:
    """Return ``weights`` as a float64 array of ``size`` finite non-negative numbers."""
    try:
        arr = np.asarray(weights, dtype=np.float64)
    except (TypeError, ValueError):
        raise ArgumentTypeError(
            f"`weights` must be a sequence of numbers; got {type(weights).__name__}."
        ) from None
    if arr.shape != (size,):
        raise ArgumentValueError(
            f"`weights` must have one entry per dataset item ({size}); got shape {arr.shape}."
        )
    bad = arr[~np.isfinite(arr) | (arr < 0)]
    if bad.size:
        raise ArgumentValueError(f"`weights` must be finite and non-negative; got {bad[0]}.")
    with np.errstate(over="ignore"):  # an overflowing sum is reported below, not warned about
        total = arr.sum()
    if not (np.isfinite(total) and total > 0):
        raise ArgumentValueError(f"`weights` must have a finite positive sum; got {total}.")
    return arr
