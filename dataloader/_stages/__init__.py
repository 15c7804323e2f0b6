"""Stage objects of the pipeline. They know nothing of serial or parallel modes.

- ``stage.py``: :class:`Stage`, the contract of every iterator in the chain (iterate, close
  once, close upstream).
- ``task.py``: :class:`BatchTask`, the unit of work (one batch's indices or raw samples).
- ``kinds.py``: what kind a dataset is and which sampler goes with it (or the sampler that
  PyTorch's ``batch_size``/``shuffle``/``drop_last`` build).
- ``source.py``: :class:`Source`, the contract of where an epoch's tasks come from, and what
  the kinds of source share.
- ``build.py``: which source reads a dataset; with ``kinds.py``, the only module that knows
  dataset kinds.
- ``map_source.py``: a map dataset's source (one task per index list of the sampler), and its
  resume on another number of ranks.
- ``stream_sources.py``: a stream read by the main process, a stream per worker, a callable
  source's batches or jobs.
- ``fixed_epochs.py``: fixed-size epochs (``epoch_size``) over any source.
- ``streams.py``: reading a stream in the main process or a worker: batches cut from it, a
  fresh pass each time it ends (fixed-size epochs), a thread that bounds the wait for it, and
  the stream's own position at every batch boundary.
- ``shard.py``: a worker's own copy of a stream (``parallel_stream=True``), read a batch at a time.
- ``batch.py``: :class:`BatchMaker`, fetch -> transform -> collate for one task
  (runs in the main process when serial, in a worker when parallel).
- ``middle.py``: the three stages it runs (fetch, transform, collate), with their hooks, and
  the search for the samples that failed.
- ``bad_samples.py``: the bad-sample policy (``on_error``): which samples are left out or
  replaced, and by what.
- ``seeding.py``: per-batch random state derived from (seed, epoch, batch index).
- ``position.py``: where an epoch stands, the batches handed out (for ``state_dict()``).
- ``consumer.py``: stages on the consumer's side (batch maps, data echoing, reassembling chunks).
- ``buffering.py``: running upstream ahead in a background thread (the buffer stage, preload's
  thread, the stream timeout, the public ``ThreadBuffer``).
- ``occupancy.py``: which thread is inside an executor's ``next()``, so that ``close()`` from
  another thread wakes it and tears down only once it has left.
"""
