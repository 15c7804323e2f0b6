"""Arrow tables to what a stream yields: shuffled windows, full batches, rows.

Everything here works on whole columns (Arrow ``take``, NumPy slices and
copies); Python runs per batch or per window, never per row, except in
:func:`rows_of`, whose job is to make rows.

A chunk is a ``{column: array}`` dict as ``table_to_batch`` makes it: NumPy
arrays, or Arrow arrays for ``strings="arrow"``.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator

import numpy as np
import pyarrow as pa

from ..dataset import batch_array

Chunk = dict  # {column name: array}; every array has the chunk's rows
# Arrow bytes per piece a table is converted in (see in_pieces)
PIECE_BYTES = 256 * 1024


def shuffled_windows(
    tables: Iterable[pa.Table], size: int, rng_for: Callable[[int], np.random.Generator]
) -> Iterator[pa.Table]:
    """The rows of ``tables`` in windows of ``size`` rows (the last may be shorter), each
    permuted by ``rng_for(window number)``: a shuffle buffer that mixes rows of neighbouring units."""
    held: list[pa.Table] = []
    rows = window = 0
    for table in tables:
        offset = 0
        while offset < table.num_rows:
            take = min(size - rows, table.num_rows - offset)
            held.append(table.slice(offset, take))
            rows, offset = rows + take, offset + take
            if rows == size:
                yield _permuted(held, rng_for(window))
                held, rows, window = [], 0, window + 1
    if rows:
        yield _permuted(held, rng_for(window))


def in_pieces(tables: Iterable[pa.Table], size: int | None = None) -> Iterator[pa.Table]:
    """``tables`` sliced (no copies) into pieces of about ``size`` (default :data:`PIECE_BYTES`)
    bytes of Arrow data, for conversion one piece at a time.

    A row group of strings or bytes converted whole makes all its Python objects at once: 6 MB
    of JPEGs for a row group of 256, in memory the allocator has just handed back to the system,
    so each page costs a fault again. Made a piece at a time, the objects come from memory
    freed by the piece before. Measured with 2 workers over 2,000 JPEGs in row groups of 256
    (forked workers, an epoch each): 21,000 page faults an epoch whole, 16,700 in pieces, and
    the first batch 5 ms sooner. Numeric columns convert to views either way.
    """
    size = size or PIECE_BYTES
    for table in tables:
        rows = max(1, size * table.num_rows // max(table.nbytes, 1))
        if rows >= table.num_rows:
            yield table
            continue
        for start in range(0, table.num_rows, rows):
            yield table.slice(start, rows)


def drop_rows(tables: Iterable[pa.Table], rows: int) -> Iterator[pa.Table]:
    """``tables`` without their first ``rows`` rows (slices, no copies)."""
    for table in tables:
        if rows >= table.num_rows:
            rows -= table.num_rows
            continue
        yield table.slice(rows) if rows else table
        rows = 0


def _permuted(tables: list[pa.Table], rng: np.random.Generator) -> pa.Table:
    table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
    return table.take(pa.array(rng.permutation(table.num_rows)))


def cut_batches(chunks: Iterable[Chunk], size: int) -> Iterator[tuple[Chunk, int]]:
    """``(batch, rows)`` for every ``size`` rows of ``chunks`` in order, batches crossing chunk
    boundaries; only the last may be shorter."""
    held: list[Chunk] = []
    rows = 0
    for chunk in chunks:
        length = chunk_rows(chunk)
        offset = 0
        while offset < length:
            take = min(size - rows, length - offset)
            held.append(chunk if take == length else {k: v[offset : offset + take] for k, v in chunk.items()})
            rows, offset = rows + take, offset + take
            if rows == size:
                yield join(held), size
                held, rows = [], 0
    if rows:
        yield join(held), rows


def join(parts: list[Chunk]) -> Chunk:
    """One batch from consecutive parts, in arrays of its own (numbers: from :func:`batch_array`,
    so a worker writes them straight into the shared memory they travel in)."""
    return {name: _joined([part[name] for part in parts]) for name in parts[0]}


def _joined(arrays: list[Any]) -> Any:
    first = arrays[0]
    if isinstance(first, np.ndarray):
        rows = sum(len(a) for a in arrays)
        if first.dtype.kind in "biufcmM":
            out = batch_array((rows, *first.shape[1:]), first.dtype)
            return np.concatenate(arrays, out=out) if len(arrays) > 1 else _copy_into(out, first)
        return np.concatenate(arrays) if len(arrays) > 1 else first.copy()
    if isinstance(first, pa.ChunkedArray):
        return pa.chunked_array([c for a in arrays for c in a.chunks], type=first.type).combine_chunks()
    return pa.concat_arrays(arrays) if len(arrays) > 1 else first


def _copy_into(out: np.ndarray, source: np.ndarray) -> np.ndarray:
    out[...] = source
    return out


def chunk_rows(chunk: Chunk) -> int:
    return len(next(iter(chunk.values()))) if chunk else 0


def rows_of(chunks: Iterable[Chunk]) -> Iterator[dict]:
    """Each row of ``chunks`` as ``{column: value}``."""
    for chunk in chunks:
        names, columns = list(chunk), list(chunk.values())
        for index in range(chunk_rows(chunk)):
            yield {name: column[index] for name, column in zip(names, columns)}


def batch_rows(batch: Chunk) -> list[dict]:
    """The rows of a batch (what ``Collated.rows()`` returns)."""
    return list(rows_of([batch]))
