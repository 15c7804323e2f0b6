"""The shared-memory transport between workers and the main process.

- ``segment.py``: one anonymous shared-memory segment (memfd), created by a worker,
  mapped by the main process from a passed file descriptor.
- ``mapping.py``: shared mappings that hold no file descriptor (``mmap.mmap`` keeps one).
- ``arena.py``: the worker's pool of reusable segments and the bump allocator the
  collator writes batches into.
- ``codec.py``: a batch -> (small metadata, buffers in a segment) and back, with
  pickle protocol 5 out-of-band buffers (NumPy and Arrow data are not copied).
- ``skeleton.py``: the metadata of plain batches (containers of arrays): a cached
  skeleton number and the arrays' shapes instead of a pickle.
- ``receiver.py``: the main process's side: maps segments, builds zero-copy views
  and notices when the user has dropped every view of a batch.
"""
