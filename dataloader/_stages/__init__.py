"""Stage objects of the pipeline. They know nothing of serial or parallel modes.

- ``task``: :class:`BatchTask`, the unit of work (one batch's indices or raw samples).
- ``source``: turns a sampler or a stream into tasks (runs in the main process).
- ``batch``: :class:`BatchMaker`, fetch -> transform -> collate for one task
  (runs in the main process when serial, in a worker when parallel).
- ``seeding``: per-batch random state derived from (seed, epoch, batch index).
"""
