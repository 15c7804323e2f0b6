"""Sequence packing: variable-length samples packed into rows of ``seq_len``: :class:`PackedStream`.

Files:

- ``_stream.py``: ``PackedStream``, the public stream: arguments, epochs, state, fingerprint.
- ``_run.py``: one ``iter()`` in one process: windows read, packed, yielded; the state between rows.
- ``_source.py``: the source's kind, opening it at a window's start, its position.
- ``_window.py``: reading a window (``transform``, the ``too_long`` rule); the carry's encoding (a held-back row, or concat's rest).
- ``_fields.py``: the packed fields of a sample, their dtypes and trailing shapes.
- ``_fit.py``: first fit, best fit decreasing and concat cuts: pure functions of lengths.
- ``_rows.py``: a window's rows in bulk: the field matrices, segment ids and positions.
- ``_stats.py``: ``PackStats`` and its counts.
- ``_checks.py``: the checks of the arguments and of a state to resume from.
"""

from ._stats import PackStats
from ._stream import PackedStream

__all__ = ["PackStats", "PackedStream"]
