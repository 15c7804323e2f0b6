"""Getting batches onto a device: framework adapters and the preload stage.

- ``structure.py``: map a function over the array leaves of a nested batch,
  keeping dict/list/tuple/namedtuple structure exactly.
- ``adapters.py``: choose an adapter from ``device=``/``framework=`` and check it
  at construction; NumPy's adapter lives there, ``torch_adapter.py`` and
  ``megengine_adapter.py`` convert to those frameworks, imported lazily.
- ``preload.py``: runs upstream and the conversion in a background thread, so
  batch k+1 is copied while the consumer works on batch k.
"""
