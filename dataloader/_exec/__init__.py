"""Executors: run an epoch's tasks serially or in workers, then hand batches out.

- ``pipeline.py``: :class:`Pipeline`, what a ``DataLoader`` owns: the source, persistent
  workers, and for each epoch the chain source -> executor -> consumer stages.
- ``spec.py``: :class:`PipelineSpec`, the loader's resolved building blocks and options.
- ``pool_start.py``: starting the workers (boot records, shared-memory budget, memory checks).
- ``serial.py``: the batch maker runs in the calling thread.
- ``parallel.py``: the batch maker runs in workers; batches come back through the
  shared-memory transport and a reorder buffer (``reorder.py``). Its parts, one job each:
  ``dispatch.py`` (which worker gets the next task, within the prefetch limits),
  ``grouping.py`` (how many tasks one message carries), ``releases.py``, ``waiting.py``,
  ``inbox.py``, ``overflow.py``, ``timeout_report.py``, ``sender.py``, ``resizing.py`` (the
  pool growing and shrinking while an epoch runs) and ``recovery.py`` (going on after a
  sample killed its worker).
- ``iterator.py``: :class:`LoaderIterator`, what ``iter(loader)`` returns.
- ``checkpoint.py``: a loader's state (``state_dict``/``load_state_dict``): its format, the
  configuration and fingerprints it fits, its digest; ``state_fields.py`` checks its
  position's fields one by one and against each other; ``reshape.py`` reads every rank's
  states (or one rank's) of another world size into where this loader resumes.
"""
