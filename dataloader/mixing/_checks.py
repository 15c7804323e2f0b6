"""The checks of a mix's arguments (its sources and weights) and of a state given to resume it."""

from __future__ import annotations

import math
import numbers
from typing import Any, Mapping, Sequence

from .._order_state import check_order
from .._validate import check_non_negative_int, check_non_negative_number
from ..errors import ArgumentTypeError, ArgumentValueError
from ._sources import Member

STATE_KEYS = ("epoch", "taken", "delivered", "exhausted", "state")  # of each source in a state
# Why each part of a mix's order_fingerprint() must match for a state to resume it.
_WHY = {
    "kind": "a state of another kind of stream places nothing here",
    "sources": "the sources would read other items, or the same items in another order",
    "weights": "the draws pick sources by the weights",
    "stop": "it decides which items an epoch holds",
    "seed": "the seed fixes the draws and the map sources' order",
    "world_size": "each process's share of the sources depends on it",
    "rank": "each process's share of the sources depends on it",
}


def named(sources: Any) -> tuple[list[str], list[Any]]:
    """The names and the sources: a dict's keys, else "0", "1", ... in the list's order."""
    if isinstance(sources, Mapping):
        names, found = list(sources.keys()), list(sources.values())
        bad = [name for name in names if not isinstance(name, str) or not name]
        if bad:
            raise ArgumentTypeError(f"`sources` must be named by non-empty strings; got the name {bad[0]!r}.")
    elif isinstance(sources, Sequence) and not isinstance(sources, (str, bytes)):
        found = list(sources)
        names = [str(number) for number in range(len(found))]
    else:
        raise ArgumentTypeError(
            f"`sources` must be a list of sources or a dict of name -> source; got {type(sources).__name__}."
        )
    if not found:
        raise ArgumentValueError("`sources` is empty; a mix needs at least one source.")
    return names, found


def weights_of(weights: Any, names: list[str]) -> list[float]:
    """One finite weight >= 0 per source (default: all 1.0), at least one of them positive."""
    if weights is None:
        return [1.0] * len(names)
    if isinstance(weights, Mapping):
        if sorted(map(str, weights)) != sorted(names):
            raise ArgumentValueError(
                f"`weights` names the sources {sorted(map(str, weights))}, but the sources are "
                f"{sorted(names)}; give one weight per source name."
            )
        given = [weights[name] for name in names]
    elif isinstance(weights, Sequence) and not isinstance(weights, (str, bytes)):
        given = list(weights)
    elif hasattr(weights, "tolist"):  # a NumPy array
        given = list(weights.tolist())
    else:
        raise ArgumentTypeError(
            f"`weights` must be a list of numbers, a dict of name -> number, or None; got {type(weights).__name__}."
        )
    if len(given) != len(names):
        raise ArgumentValueError(
            f"`weights` must give one weight per source: {len(names)} sources, {len(given)} weights."
        )
    # + 0.0 makes -0.0 a plain 0.0 (the same weight, and the same fingerprint once saved)
    values = [check_non_negative_number(f"weights[{name!r}]", w) + 0.0 for name, w in zip(names, given)]
    for name, value in zip(names, values):
        if not math.isfinite(value):
            raise ArgumentValueError(f"`weights[{name!r}]` must be a finite number; got {value!r}.")
    if not any(values):
        raise ArgumentValueError(
            "`weights` are all 0: no source would ever be drawn. Give at least one source a positive weight."
        )
    return values


def agreed_kind(members: list[Member]) -> bool:
    """Whether the sources yield whole batches (else rows); sources that disagree are an error."""
    batches = [m.name for m in members if m.yields_batches]
    if batches and len(batches) < len(members):
        rows = [m.name for m in members if not m.yields_batches]
        raise ArgumentValueError(
            f"MixedStream: the sources {batches} yield whole batches (yields_batches=True) but "
            f"{rows} yield rows; a mix draws items of one kind. Read every source in rows "
            "(batch_size=None on a ParquetStream; map datasets yield rows), or every one in batches."
        )
    return bool(batches)


def common_batch_size(members: list[Member]) -> int | None:
    """The batch size every batch source has, or None where they differ or do not say."""
    sizes = {getattr(m.source, "batch_size", None) for m in members}
    size = sizes.pop() if len(sizes) == 1 else None
    return size if isinstance(size, int) else None


def check_world(members: list[Member], world_size: int, rank: int) -> None:
    """A source that shards itself for another world than the mix's would read another share."""
    for member in members:
        own = (getattr(member.source, "world_size", None), getattr(member.source, "rank", None))
        if all(isinstance(v, numbers.Integral) for v in own) and own != (world_size, rank):
            raise ArgumentValueError(
                f"MixedStream: source {member.name!r} is sharded for world_size={own[0]}, rank={own[1]}, "
                f"but the mix for world_size={world_size}, rank={rank}; its rows would not be "
                "shared out as the mix's. Build every source and the mix with the same world_size and rank."
            )


def checked_state(state: Any, members: list[Member], order: dict[str, Any]) -> dict[str, Any]:
    """``state`` if it is a ``state_dict()`` of a mix whose ``order_fingerprint()`` is ``order``
    (the same sources, weights, stop, seed and world), else an error naming what differs."""
    names = [m.name for m in members]
    if not (isinstance(state, Mapping) and {"epoch", "draws", "sources", "order"} <= set(state)
            and isinstance(state["sources"], Mapping)):
        raise ArgumentValueError(
            "MixedStream.load_state_dict: the state must be what a MixedStream's state_dict() "
            f"returned, a dict of 'epoch', 'draws', 'sources' and 'order'; got {state!r}. (A state "
            "saved by an older version holds no 'order': start the epoch afresh.)"
        )
    check_order("MixedStream", "mix", state["order"], order, _WHY)
    unknown = [name for name in state["sources"] if name not in names]
    if unknown:
        raise ArgumentValueError(
            f"MixedStream.load_state_dict: the state holds the sources {unknown}, which this mix "
            f"does not have (its sources: {names}). Resume with the mix that saved the state."
        )
    for name, saved in state["sources"].items():
        if not (isinstance(saved, Mapping) and set(STATE_KEYS) <= set(saved)):
            raise ArgumentValueError(
                f"MixedStream.load_state_dict: the state of source {name!r} must hold {list(STATE_KEYS)}; got {saved!r}."
            )
        for key in ("epoch", "taken", "delivered"):
            check_non_negative_int(f"state['sources'][{name!r}][{key!r}]", saved[key])
    check_non_negative_int("state['epoch']", state["epoch"])
    check_non_negative_int("state['draws']", state["draws"])
    for member in members:
        saved = state["sources"].get(member.name)
        refused = getattr(member.source, "resume_refused", None)
        if refused and saved is not None and saved["taken"] and not saved["exhausted"] and not member.keeps_state:
            raise ArgumentValueError(f"MixedStream: source {member.name!r} cannot resume: {refused}")
    return dict(state)
