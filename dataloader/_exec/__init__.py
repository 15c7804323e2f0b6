"""Executors: run an epoch's tasks serially or in workers, then hand batches out.

- ``serial``: the batch maker runs in the calling thread.
- ``parallel``: the batch maker runs in worker processes; batches come back
  through the shared-memory transport and a reorder buffer.
- ``pipeline``: assembles source -> executor -> consumer stages for one epoch.
- ``iterator``: :class:`LoaderIterator`, what ``iter(loader)`` returns.
"""
