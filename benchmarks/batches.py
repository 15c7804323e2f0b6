"""Batches as the bench sees them: their arrays, what the consumer does with each, and the plain
loop (``dataset[i]`` for each index, then ``np.stack``) that every loader is compared with."""

from __future__ import annotations

from typing import Any, Callable, Iterator

import numpy as np

from dataloader import Dataset


def leaves(batch: Any) -> list:
    """Every array (or number) of a nested batch of dicts, lists and tuples, depth first; a
    list of strings (a batch's text field) is one leaf."""
    if isinstance(batch, dict):
        return [leaf for value in batch.values() for leaf in leaves(value)]
    if isinstance(batch, (list, tuple)) and not _is_text(batch):
        return [leaf for value in batch for leaf in leaves(value)]
    return [batch]


def _is_text(column: Any) -> bool:
    return isinstance(column, list) and bool(column) and isinstance(column[0], (str, bytes))


def touch(batch: Any) -> float:
    """What the consumer does with every batch, whoever made it: sum 16 values of each array
    (and count the strings of a text field)."""
    total = 0.0
    for leaf in leaves(batch):
        if _is_text(leaf):
            total += len(leaf)
            continue
        array = leaf.numpy() if hasattr(leaf, "numpy") else np.asarray(leaf)
        total += float(array.reshape(-1)[:16].sum())
    return total


def plain_batches(
    dataset: Dataset, order: list[int] | np.ndarray, batch_size: int, forever: bool = False,
    collate: Callable[[list], Any] | None = None,
) -> Iterator[Any]:
    """The batches of ``order`` made by the plain loop; with ``forever``, epoch after epoch.
    ``collate`` replaces the loop's :func:`stack` (the bench's collator floor passes ours).

    An int64 array ``order`` (a sampler's permutation) has each batch's indices made Python
    ints by one ``tolist()``, as our loader does: neither pays for ints made before the timing,
    nor for a new permutation inside it (our loader draws its epoch's at the first batch)."""
    collate = collate or stack
    while len(order):
        for start in range(0, len(order), batch_size):
            indices = order[start : start + batch_size]
            if isinstance(indices, np.ndarray):
                indices = indices.tolist()
            yield collate([dataset[i] for i in indices])
        if not forever:
            return


def stack(samples: list) -> tuple | dict:
    """The baseline's collation, field by field: arrays stacked, numbers into a 1-d array,
    strings into a list; a dict per key, anything else per position."""
    if isinstance(samples[0], dict):
        return {key: _column([sample[key] for sample in samples]) for key in samples[0]}
    return tuple(_column(column) for column in zip(*samples))


def _column(column: Any) -> Any:
    first = column[0]
    if isinstance(first, np.ndarray):
        return np.stack(column)
    return list(column) if isinstance(first, (str, bytes)) else np.array(column)
