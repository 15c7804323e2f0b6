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
REWEIGHTED = ("weights", "schedule")  # the fields of the order that reweight=True lets differ
WORLD = ("world_size", "rank")  # the fields of the order that differ between the states of a list
# Why each part of a mix's order_fingerprint() must match for a state to resume it.
_WHY = {
    "kind": "a state of another kind of stream places nothing here",
    "sources": "the sources would read other items, or the same items in another order",
    "weights": "the draws pick sources by the weights; load_state_dict(state, reweight=True) "
               "takes a state saved under other weights or another schedule",
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


def _check_rank_sources(saved: Any, members: list[Member], order: dict[str, Any]) -> None:
    """The sources of an old rank's state are this mix's: the same names, and each the same
    source, except a stream that shards itself (its fingerprint holds its world), whose own
    ``load_state_dict(list)`` checks its old ranks' states."""
    theirs = saved.get("sources") if isinstance(saved, Mapping) else None
    mine = order["sources"]
    if not isinstance(theirs, Mapping) or sorted(theirs) != sorted(mine):
        check_order("MixedStream", "mix", {"sources": theirs}, {"sources": mine}, _WHY)
    for member in members:
        if getattr(member.source, "loads_rank_states", False) is not True:
            check_order("MixedStream", "mix", {"sources": {member.name: theirs[member.name]}},  # type: ignore[index]
                        {"sources": {member.name: mine[member.name]}}, _WHY)


def _is_layout(layout: Any) -> bool:
    """Whether ``layout`` is a map source's cut after reshards: ``[[world, [taken per rank]], ...]``."""
    def whole(value: Any, least: int) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= least
    return isinstance(layout, list) and all(
        isinstance(layer, (list, tuple)) and len(layer) == 2 and whole(layer[0], 1)
        and isinstance(layer[1], (list, tuple)) and len(layer[1]) == layer[0]
        and all(whole(taken, 0) for taken in layer[1])
        for layer in layout
    )


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


def checked_state(
    state: Any, members: list[Member], order: dict[str, Any], reweight: bool = False, any_world: bool = False,
) -> dict[str, Any]:
    """``state`` if it is a ``state_dict()`` of a mix whose ``order_fingerprint()`` is ``order``
    (the same sources, weights, stop, seed and world; ``reweight``: any weights or schedule;
    ``any_world``: any world, for one state of a list of every rank's), else an error naming
    what differs."""
    names = [m.name for m in members]
    if not (isinstance(state, Mapping) and {"epoch", "draws", "sources", "order"} <= set(state)
            and isinstance(state["sources"], Mapping)):
        raise ArgumentValueError(
            "MixedStream.load_state_dict: the state must be what a MixedStream's state_dict() "
            f"returned, a dict of 'epoch', 'draws', 'sources' and 'order'; got {state!r}. (A state "
            "saved by an older version holds no 'order': start the epoch afresh.)"
        )
    saved_order, mine = state["order"], order
    ignored = (REWEIGHTED if reweight else ()) + (WORLD + ("sources",) if any_world else ())
    if isinstance(saved_order, Mapping):
        saved_order = {key: value for key, value in saved_order.items() if key not in ignored}
        order = {key: value for key, value in order.items() if key not in ignored}
        world = state["order"].get("world_size")
        if not any_world and isinstance(world, int) and world != order["world_size"]:
            check_order("MixedStream", "mix", {**saved_order, "world_size": order["world_size"],
                                                "rank": order["rank"]}, order, _WHY)
            raise ArgumentValueError(
                f"MixedStream.load_state_dict: the state was saved by rank {state['order'].get('rank')!r} "
                f"of a world of {world}; this mix is rank {order['rank']} of {order['world_size']}. One "
                "rank's state does not say where the others stood: pass the list of every old rank's "
                "state, in rank order, to load_state_dict(states) (a DataLoader: the list of its "
                "states, from dataloader.gather_states or load_rank_states)."
            )
    check_order("MixedStream", "mix", saved_order, order, _WHY)
    if any_world:
        _check_rank_sources(state["order"], members, mine)
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
        if not _is_layout(saved.get("layout", [])):
            raise ArgumentValueError(
                f"MixedStream.load_state_dict: state['sources'][{name!r}]['layout'] must be a list of "
                f"[world_size, [items taken per rank]] (one per reshard); got {saved['layout']!r}. "
                "Load the state as state_dict() returned it."
            )
    check_non_negative_int("state['epoch']", state["epoch"])
    check_non_negative_int("state['draws']", state["draws"])
    if "drawn" in state and check_non_negative_int("state['drawn']", state["drawn"]) < state["draws"]:
        raise ArgumentValueError(
            f"MixedStream.load_state_dict: state['drawn'] ({state['drawn']}) is less than "
            f"state['draws'] ({state['draws']}), the items of its epoch alone; the state was edited. "
            "Load the state as state_dict() returned it."
        )
    for member in members:
        saved = state["sources"].get(member.name)
        refused = getattr(member.source, "resume_refused", None)
        if refused and saved is not None and saved["taken"] and not saved["exhausted"] and not member.keeps_state:
            raise ArgumentValueError(f"MixedStream: source {member.name!r} cannot resume: {refused}")
    return dict(state)
