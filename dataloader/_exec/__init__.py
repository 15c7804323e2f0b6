"""Executors: run an epoch's tasks serially or in workers, then hand batches out.

- ``pipeline``: :class:`Pipeline`, what a ``DataLoader`` owns: the source, persistent
  workers, and for each epoch the chain source -> executor -> consumer stages.
- ``spec``: :class:`PipelineSpec`, the loader's resolved building blocks and options.
- ``pool_start``: starting the workers (boot records, shared-memory budget, memory checks).
- ``serial``: the batch maker runs in the calling thread.
- ``parallel``: the batch maker runs in workers; batches come back through the
  shared-memory transport and a reorder buffer (``reorder``). Its parts, one job
  each: ``dispatch``, ``releases``, ``waiting``, ``inbox``, ``overflow``,
  ``timeout_report``, ``sender``.
- ``iterator``: :class:`LoaderIterator`, what ``iter(loader)`` returns.
- ``checkpoint``: a loader's state (``state_dict``/``load_state_dict``): its format, the
  configuration and fingerprints it fits, its digest; ``state_fields`` checks its position's
  fields one by one and against each other.
"""
