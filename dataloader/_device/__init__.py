"""Getting batches onto a device: framework adapters and the preload stage.

- ``structure``: map a function over the array leaves of a nested batch,
  keeping dict/list/tuple/namedtuple structure exactly.
- ``adapters``: choose an adapter from ``device=``/``framework=`` and check it
  at construction; ``numpy_adapter``, ``torch_adapter`` and
  ``megengine_adapter`` convert, imported lazily.
- ``preload``: runs upstream and the conversion in a background thread, so
  batch k+1 is copied while the consumer works on batch k.
"""
