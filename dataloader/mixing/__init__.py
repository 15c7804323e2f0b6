"""Weighted mixing of several sources into one stream: :class:`MixedStream`.

Files:

- ``_stream.py``: ``MixedStream``, the public stream: arguments, epochs, state, fingerprint.
- ``_run.py``: one ``iter()`` in one process: the open sources, their counts, the stop rule;
  ``MixStats`` and ``MixSourceStats``.
- ``_draws.py``: which source each item comes from, a block of NumPy uniforms at a time.
- ``_schedule.py``: ``WeightSchedule``, weights that change with the count of items drawn.
- ``_sources.py``: a source's kind, opening it for a source epoch, a map dataset's shard.
- ``_checks.py``: the checks of the arguments and of a state to resume from.
- ``_elastic.py``: the list of every old rank's state, as where a rank of a new world starts.
"""

from ._run import MixSourceStats, MixStats
from ._schedule import WeightSchedule
from ._stream import MixedStream

__all__ = ["MixSourceStats", "MixStats", "MixedStream", "WeightSchedule"]
