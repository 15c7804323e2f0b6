"""Stage objects of the pipeline. They know nothing of serial or parallel modes.

- ``stage``: :class:`Stage`, the contract of every iterator in the chain (iterate, close once,
  close upstream).
- ``task``: :class:`BatchTask`, the unit of work (one batch's indices or raw samples).
- ``source``: where an epoch's tasks come from; the only module that knows dataset kinds
  (map, stream, a stream per worker, callable sources; fixed-size epochs over any of them).
- ``shard``: a worker's own copy of a stream (``parallel_stream=True``), read a batch at a time.
- ``batch``: :class:`BatchMaker`, fetch -> transform -> collate for one task
  (runs in the main process when serial, in a worker when parallel).
- ``seeding``: per-batch random state derived from (seed, epoch, batch index).
- ``consumer``: stages on the consumer's side (batch maps, data echoing, reassembling chunks).
- ``buffering``: running upstream ahead in a background thread (the buffer stage, preload's
  thread, the stream timeout, the public ``ThreadBuffer``).
- ``occupancy``: which thread is inside an executor's ``next()``, so that ``close()`` from
  another thread wakes it and tears down only once it has left.
"""
