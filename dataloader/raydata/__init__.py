"""Ray Data as a source: a Ray cluster preprocesses, this loader feeds the training loop.

Importing this package does not import ray; building a :class:`RayStream` does
(``pip install "dataloader[ray]"``).

- ``_ray.py``: the lazy import of ray, the kinds of source accepted, Ray's failures as ours.
- ``_stream.py``: ``RayStream``, a stream over a Ray ``Dataset`` or ``DataIterator``, and its stats.
"""

from ._stream import RayStream, RayStreamStats

__all__ = ["RayStream", "RayStreamStats"]
