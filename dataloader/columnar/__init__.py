"""Columnar data: Arrow and Parquet datasets and streams, read in bulk, a batch at a time.

- ``_convert``: Arrow columns to NumPy batches (the type table lives there).
- ``_files``: paths, URIs and ``pyarrow.fs`` filesystems resolved to file lists.
- ``_streams``: ``ParquetStream`` and ``ArrowStream``, stream datasets sharded over ranks and workers.
- ``_sharding``: an epoch's order of units (row groups, record batches) cut between ranks and workers.
- ``_readers``: units' row counts from file metadata, and reading a piece of a unit.
- ``_batching``: Arrow tables to shuffled windows, full batches and rows, column by column.
- ``_arrow_dataset``: ``ArrowDataset``, random access over a table or memory-mapped Arrow IPC files.
- ``_parquet_dataset``: ``ParquetDataset``, random access over Parquet row groups, with a decode cache.
- ``_table_dataset``: what the two datasets share: options, indexing, rows, the batch plan.
- ``_gather``: a batch's rows located among chunks and taken with one ``take`` per chunk.
- ``_fixed``: fixed-width columns as zero-copy NumPy views, gathered across a file's record batches.
- ``_writer``: ``write_parquet_shards``, any dataset or iterable as numbered Parquet shards.
- ``_to_arrow``: the writer's samples to Arrow columns (fixed-shape arrays, their shapes in metadata).
- ``_shard_files``: the writer's shard files: directory checks, temporary names renamed when whole.
"""

from ._arrow_dataset import ArrowDataset
from ._parquet_dataset import ParquetDataset
from ._streams import ArrowStream, ParquetStream, StreamStats
from ._writer import write_parquet_shards

__all__ = [
    "ArrowDataset",
    "ArrowStream",
    "ParquetDataset",
    "ParquetStream",
    "StreamStats",
    "write_parquet_shards",
]
