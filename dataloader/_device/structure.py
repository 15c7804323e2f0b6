"""Map over the array leaves of a nested batch, keeping its structure exactly."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np


def map_arrays(batch: Any, convert: Callable[[np.ndarray], Any]) -> Any:
    """``batch`` with every ndarray replaced by ``convert(array)``.

    Dicts stay dicts (same key order), namedtuples their own type, tuples
    tuples, lists lists; str, bytes, None and numbers pass through unchanged.
    """
    if isinstance(batch, np.ndarray):
        return convert(batch)
    if isinstance(batch, dict):
        return type(batch)((key, map_arrays(value, convert)) for key, value in batch.items())
    if isinstance(batch, tuple):
        items = [map_arrays(value, convert) for value in batch]
        return type(batch)(*items) if hasattr(batch, "_fields") else tuple(items)
    if isinstance(batch, list):
        return [map_arrays(value, convert) for value in batch]
    return batch


def leaves(batch: Any) -> list:
    """Every non-container leaf of ``batch``, depth first."""
    if isinstance(batch, dict):
        return [leaf for value in batch.values() for leaf in leaves(value)]
    if isinstance(batch, (list, tuple)):
        return [leaf for value in batch for leaf in leaves(value)]
    return [batch]
