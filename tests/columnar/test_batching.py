"""Arrow tables cut into pieces for conversion (``_batching.in_pieces``)."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from dataloader.columnar._batching import in_pieces


def _table(sizes: list[int]) -> pa.Table:
    """One row per entry: an int and a blob of that many bytes."""
    return pa.table({"n": pa.array(range(len(sizes)), pa.int64()),
                     "blob": pa.array([b"x" * size for size in sizes], pa.binary())})


@settings(max_examples=80, deadline=None)
@given(tables=st.lists(st.lists(st.integers(0, 300), max_size=40), min_size=1, max_size=3),
       size=st.integers(1, 5000))
def test_pieces_hold_every_row_once_in_order_and_cut_only_big_tables(tables, size):
    originals = [_table(sizes) for sizes in tables]
    pieces = list(in_pieces(originals, size))
    joined = pa.concat_tables(pieces) if pieces else None
    assert joined is not None and joined.equals(pa.concat_tables(originals))
    empty = sum(1 for piece in pieces if not piece.num_rows)
    assert empty == sum(1 for table in originals if not table.num_rows)  # no empty piece made
    for table in originals:
        if table.nbytes <= size:
            assert any(piece is table for piece in pieces)  # small enough: left whole
    if len(originals) == 1 and originals[0].num_rows >= 2 and originals[0].nbytes >= 2 * size:
        assert len(pieces) >= 2


def test_a_piece_is_a_slice_of_the_tables_buffers_not_a_copy():
    table = _table([1000] * 64)
    pieces = list(in_pieces([table], 8000))
    assert len(pieces) > 4
    data = table.column("blob").chunk(0).buffers()[2]
    for piece in pieces:
        blob = piece.column("blob").chunk(0).buffers()[2]
        assert blob.address == data.address  # the same bytes, only the offset differs
