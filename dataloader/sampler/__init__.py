"""Batch samplers: iterating one yields lists of dataset indices, one list per batch.

MegEngine's names and semantics, with its bugs fixed (``len()`` ignored ``indices``; a dataset
smaller than ``batch_size`` crashed with ``drop_last=True``; MegEngine 1.x's ``ReplacementSampler``
with weights drew counts from a multinomial, not indices). An epoch's order is a pure function of ``(seed, epoch)``, so any process can rebuild
it. Each epoch is one NumPy array, turned into lists in large chunks, never element by element.

- ``_base.py``: :class:`Sampler`, the contract, and :class:`StreamSampler`, a stream's.
- ``_map.py``: :class:`MapSampler` and the samplers of a map dataset (sequential, random,
  with replacement), and :func:`follow_dataset`.
- ``_infinite.py``: :class:`Infinite`, any sampler restarted whenever it ends.
- ``_reading.py``: how the loader reads a sampler (from a batch on, as arrays, its state).
"""

from ._base import Sampler, StreamSampler
from ._infinite import Infinite
from ._map import MapSampler, RandomSampler, ReplacementSampler, SequentialSampler

__all__ = [
    "Infinite",
    "MapSampler",
    "RandomSampler",
    "ReplacementSampler",
    "Sampler",
    "SequentialSampler",
    "StreamSampler",
]
