"""How the loader reads a sampler: from a batch on, as arrays where it trusts it, and its state."""

from __future__ import annotations

import inspect
import itertools
from typing import Any, Iterator

from ._map import MapSampler


def yields_valid_indices(sampler: Any) -> bool:
    """Whether ``sampler`` is one of ours (or ``Infinite`` over one), whose batches are fresh
    lists of Python ints >= 0 (checked when it was built): the loader need not copy them, and
    takes a plain one's batches as int64 arrays (:meth:`MapSampler.index_arrays`), which it
    does not check for negative indices. A subclass may override ``sample()``: not trusted."""
    inner = sampler.sampler if vars(type(sampler)).get("_wraps_one") is True else sampler  # Infinite
    # Each such class says so in its own namespace: a subclass does not inherit the trust.
    return vars(type(inner)).get("_fresh_int_batches") is True


def batches_from(sampler: Any, start: int, arrays: bool = False) -> Iterator[Any]:
    """``iter(sampler)`` from batch ``start`` on: a :class:`MapSampler` whose ``__iter__`` is
    ``batch()`` never makes the batches before it (``batch(start)``, its own if it overrides
    it with a ``start`` parameter; an override without one, written before ``batch`` took it,
    is iterated as before); another sampler's are made and dropped. ``arrays``: a
    :class:`MapSampler`'s batches as int64 arrays (:meth:`MapSampler.index_arrays`), for a
    sampler :func:`yields_valid_indices` trusts; other samplers' stay lists."""
    kind = type(sampler)
    if isinstance(sampler, MapSampler) and kind.__iter__ is MapSampler.__iter__ and _takes_start(kind.batch):
        return sampler.index_arrays(start) if arrays else sampler.batch(start)
    it = iter(sampler)
    return itertools.islice(it, start, None) if start else it


def _takes_start(method: Any) -> bool:
    """Whether ``method`` (a ``batch`` override) takes a ``start`` argument."""
    if method is MapSampler.batch:
        return True
    try:
        return "start" in inspect.signature(method).parameters
    except (TypeError, ValueError):  # no signature to read: call it as __iter__ does
        return False


def sampler_state(sampler: Any) -> Any:
    """``sampler.state_dict()``, or None for a sampler without one."""
    state_dict = getattr(sampler, "state_dict", None)
    return None if state_dict is None else state_dict()
