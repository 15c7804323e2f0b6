"""Mixture weights that change with the count of items drawn: :class:`WeightSchedule`.

A mix's weights are constant, a piecewise schedule (a list of ``(drawn, weights)`` pairs,
constant between change points) or a callable ``schedule(drawn) -> weights``. Each becomes a
:class:`Weights`, which the draws ask for the weights in force at a count and for the count
where they may change next, so a block of draws is cut there and stays one NumPy call.
"""

from __future__ import annotations

import bisect
import numbers
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from .._digest import digest, qualified_name
from ..errors import ArgumentTypeError, ArgumentValueError
from ._checks import weights_of

CHUNK = 64  # a callable schedule is called at drawn = 0, 64, 128, ...; its weights hold for 64 draws
# Where a callable without an order_fingerprint() of its own is called for the mix's fingerprint.
PROBES = (0, 1, 10, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000)


class WeightSchedule:
    """Mixture weights as a function of ``drawn``, the number of items the mix has drawn since
    the run began (in this process, carried from epoch to epoch; a state carries it).

    ``steps`` is either a list of ``(drawn, weights)`` pairs, the first at ``drawn=0`` and the
    counts strictly increasing, whose weights hold from their count to the next pair's (the
    switch is exact: the draw numbered ``drawn`` is the first with the new weights); or a callable
    ``schedule(drawn) -> weights``, called at ``drawn = 0, 64, 128, ...`` (:data:`CHUNK`), whose
    weights hold for the 64 draws from there (one call per 64 items, not one per item; use the
    list form for a switch at an exact count). Weights are what ``MixedStream(weights=...)``
    takes: one number >= 0 per source (a list in source order, or a dict by name). A
    ``MixedStream`` takes the list or the callable as they are, or a ``WeightSchedule``.

    Example::

        anneal = WeightSchedule([(0, {"web": 9, "code": 1}), (1_000_000, {"web": 1, "code": 1})])
        mix = MixedStream({"web": web, "code": code}, weights=anneal)
    """

    def __init__(self, steps: Sequence[tuple[int, Any]] | Callable[[int], Any]) -> None:
        if isinstance(steps, WeightSchedule):
            steps = steps.steps
        self.steps: list[tuple[int, Any]] | Callable[[int], Any] = (
            steps if callable(steps) else _checked_steps(steps)
        )

    @property
    def piecewise(self) -> bool:
        """Whether the schedule is a list of ``(drawn, weights)`` pairs (else a callable)."""
        return not callable(self.steps)

    def __repr__(self) -> str:
        shown = qualified_name(self.steps) if callable(self.steps) else self.steps
        return f"WeightSchedule({shown!r})"


def _checked_steps(steps: Any) -> list[tuple[int, Any]]:
    """``steps`` as a list of ``(drawn, weights)``, the first at 0 and strictly increasing."""
    if not is_steps(steps) or not steps:
        raise ArgumentTypeError(
            "a weight schedule must be a non-empty list of (drawn, weights) pairs or a callable "
            f"schedule(drawn) -> weights; got {steps!r}."
        )
    pairs: list[tuple[int, Any]] = []
    for number, pair in enumerate(steps):
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
            raise ArgumentTypeError(
                f"weight schedule pair {number} must be a (drawn, weights) pair; got {pair!r}."
            )
        drawn = pair[0]
        if isinstance(drawn, bool) or not isinstance(drawn, numbers.Integral) or drawn < 0:
            raise ArgumentValueError(
                f"weight schedule pair {number}: drawn must be an integer >= 0 (a count of items "
                f"drawn); got {drawn!r}."
            )
        if number == 0 and drawn != 0:
            raise ArgumentValueError(
                f"weight schedule pair 0 is at drawn={int(drawn)}; the first pair must be at drawn=0 "
                "(the weights from the first item on). Add a (0, weights) pair first."
            )
        if pairs and drawn <= pairs[-1][0]:
            raise ArgumentValueError(
                f"weight schedule pair {number} is at drawn={int(drawn)}, not after pair {number - 1} "
                f"at drawn={pairs[-1][0]}; the counts must be strictly increasing. Sort the pairs "
                "and merge those at the same count."
            )
        pairs.append((int(drawn), pair[1]))
    return pairs


def is_steps(weights: Any) -> bool:
    """Whether ``weights`` is a schedule's list of pairs rather than a list of weights: a list
    or tuple any of whose items is itself a list or tuple."""
    return isinstance(weights, (list, tuple)) and any(isinstance(item, (list, tuple)) for item in weights)


class Weights:
    """A mix's weights bound to its source names: :meth:`at` a count of items drawn, the weights
    in force (an array in source order) and the count where they may change next."""

    def __init__(self, weights: Any, names: list[str]) -> None:
        self._names = names
        self._fn: Callable[[int], Any] | None = None
        self._cached: tuple[int, npt.NDArray[np.float64]] | None = None
        self._last: tuple[Any, npt.NDArray[np.float64]] = (None, np.empty(0))  # the callable's last weights
        if isinstance(weights, WeightSchedule) or callable(weights) or is_steps(weights):
            schedule = weights if isinstance(weights, WeightSchedule) else WeightSchedule(weights)
            if schedule.piecewise:
                self._starts = [drawn for drawn, _ in schedule.steps]  # type: ignore[union-attr]
                self._values = [self._checked(f"weight schedule pair {n} (drawn={drawn})", value)
                                for n, (drawn, value) in enumerate(schedule.steps)]  # type: ignore[arg-type]
            else:
                self._fn = schedule.steps  # type: ignore[assignment]
                self._starts, self._values = [], []
        else:
            self._starts, self._values = [0], [np.array(weights_of(weights, names), dtype=np.float64)]

    @property
    def constant(self) -> bool:
        """Whether the weights never change."""
        return self._fn is None and len(self._starts) == 1

    def at(self, drawn: int) -> tuple[npt.NDArray[np.float64], int | None]:
        """The weights of the draw numbered ``drawn`` and the count from which they may differ
        (None: never). Do not change the array: it is shared."""
        if self._fn is not None:
            start = drawn - drawn % CHUNK
            cached = self._cached  # read once: thread workers share the schedule and its cache
            if cached is None or cached[0] != start:
                cached = self._cached = (start, self._called(start))
            return cached[1], start + CHUNK
        piece = bisect.bisect_right(self._starts, drawn) - 1
        following = self._starts[piece + 1] if piece + 1 < len(self._starts) else None
        return self._values[piece], following

    def fingerprint(self) -> Any:
        """The schedule's identity, as plain values: constant weights as their list (as a mix
        without a schedule has always saved them); a piecewise schedule by value; a callable by
        its qualified name and its own ``order_fingerprint()`` if it has one, else a digest of
        its weights at the counts in :data:`PROBES`."""
        if self.constant:
            return self._values[0].tolist()
        if self._fn is None:
            return {"piecewise": [[start, value.tolist()] for start, value in zip(self._starts, self._values)]}
        own = getattr(self._fn, "order_fingerprint", None)
        if callable(own):
            return {"callable": qualified_name(self._fn), "fingerprint": own()}
        probed = [self._checked(f"the weight schedule {qualified_name(self._fn)}({at})", self._fn(at)).tolist()
                  for at in PROBES]
        return {"callable": qualified_name(self._fn), "values": digest(probed)}

    def _called(self, drawn: int) -> npt.NDArray[np.float64]:
        """The callable's weights at ``drawn``, checked; where it returns a list or dict equal to
        the one it returned last (a step function), the last check stands (it costs 10 us)."""
        value = self._fn(drawn)  # type: ignore[misc]
        plain = dict(value) if isinstance(value, Mapping) else list(value) if isinstance(value, (list, tuple)) else None
        last = self._last  # read once, as _cached in at()
        if plain is None or plain != last[0]:
            last = self._last = (plain, self._checked(f"the weight schedule {qualified_name(self._fn)}({drawn})", value))
        return last[1]

    def _checked(self, where: str, value: Any) -> npt.NDArray[np.float64]:
        """``value`` checked as a mix's weights; an error says which pair or call gave it."""
        try:
            return np.array(weights_of(value, self._names), dtype=np.float64)
        except (ArgumentTypeError, ArgumentValueError) as error:
            raise type(error)(f"{where}: {error}") from None
