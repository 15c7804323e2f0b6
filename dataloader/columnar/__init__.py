"""Columnar data: Arrow and Parquet datasets and streams, read in bulk, a batch at a time.

- ``_convert.py``: Arrow columns to NumPy batches (the type table lives there).
- ``_files.py``: paths, URIs and ``pyarrow.fs`` filesystems resolved to file lists.
- ``_snapshot.py``: the files a reader was built on (size, modification time, inode on a local disk), checked
  each time a file is opened, so a file replaced meanwhile is an error, not wrong rows.
- ``_streams.py``: ``ParquetStream`` and ``ArrowStream``, stream datasets sharded over ranks and workers.
- ``_stream_stats.py``: ``StreamStats``, what a stream reports of an epoch, counted as it is read.
- ``_sharding.py``: an epoch's order of units (row groups, record batches) cut between ranks and workers.
- ``_planner.py``: epoch plans in turn, with the reshards of a run that changed its world size replayed.
- ``_scattered.py``: runs of short pieces (a reshard's rest of a shuffle window) read once per unit.
- ``_elastic.py``: the states of every rank of another world checked, and the reshard history a state carries.
- ``_readers.py``: units' row counts from file metadata, and reading a piece of a unit.
- ``_batching.py``: Arrow tables to shuffled windows, full batches and rows, column by column.
- ``_arrow_dataset.py``: ``ArrowDataset``, random access over a table or memory-mapped Arrow IPC files.
- ``_parquet_dataset.py``: ``ParquetDataset``, random access over Parquet row groups, with a decode cache.
- ``_table_dataset.py``: what the two datasets share: options, indexing, rows, the batch plan.
- ``_gather.py``: a batch's rows located among chunks and taken with one ``take`` per chunk.
- ``_fixed.py``: fixed-width columns as zero-copy NumPy views, gathered across a file's record batches.
- ``_writer.py``: ``write_parquet_shards``, any dataset or iterable as numbered Parquet shards.
- ``_to_arrow.py``: the writer's samples to Arrow columns (fixed-shape arrays, their shapes in metadata).
- ``_shard_files.py``: the writer's shard files: directory checks, temporary names renamed when whole.
- ``_braces.py``: brace patterns (``train-{000000..000099}.tar``) expanded to file names.
- ``_tar_index.py``: where each sample of a WebDataset tar shard begins (a ``.idx`` sidecar, or a scan).
- ``_tar_units.py``: tar shards as units of samples; a piece read with one ranged read and parsed in memory.
- ``_tar_stream.py``: ``TarStream``, WebDataset tar shards as a stream, with the text fields decoded.
- ``_tar_writer.py``: ``write_tar_shards``, sample dicts as numbered tar shards with their indexes.
"""

from ._arrow_dataset import ArrowDataset
from ._parquet_dataset import ParquetDataset
from ._streams import ArrowStream, ParquetStream, StreamStats
from ._tar_stream import TarStream
from ._tar_writer import write_tar_shards
from ._writer import write_parquet_shards

__all__ = [
    "ArrowDataset",
    "ArrowStream",
    "ParquetDataset",
    "ParquetStream",
    "StreamStats",
    "TarStream",
    "write_parquet_shards",
    "write_tar_shards",
]
