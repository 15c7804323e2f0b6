"""A mix resumed on another number of ranks: every old rank's state in one list, turned into
where this rank of the new world starts.

Each source goes on with the items the old ranks had not delivered in its source epoch:

- a map source: each old rank's block of the permutation after its ``taken``, in rank order,
  cut anew into one block per new rank. The cut is kept in the state as a ``layout`` (one
  ``[world_size, [taken per rank]]`` per reshard), so the new world's states resume exactly
  and reshard again;
- a stream source with its own state: the list of its old ranks' states, for its own
  ``load_state_dict(list)`` (a stream with ``loads_rank_states = True``: ``ParquetStream``,
  ``ArrowStream``, ``TarStream``);
- a stream without a state of its own goes on only where no old rank had read it (it starts
  afresh) or every one had read it out.

The new rank's draws are seeded with the number of reshards too (``reshards``), so they are
neither the old ranks' nor those of a resume on the old world, and its count of items drawn
(what a weight schedule reads) is the largest of the old ranks'.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..errors import ArgumentValueError
from ._checks import checked_state
from ._sources import Member


def resharded(
    states: Any, members: list[Member], order: dict[str, Any], reweight: bool, world_size: int, rank: int,
) -> dict[str, Any]:
    """Where rank ``rank`` of ``world_size`` starts, from the list of every old rank's state:
    that rank's own state where the world is the same, else a state of this world."""
    if not states:
        raise ArgumentValueError(
            "MixedStream.load_state_dict: the list of states is empty; pass every old rank's "
            "state_dict(), in rank order."
        )
    checked = [checked_state(state, members, order, reweight, any_world=True) for state in states]
    old_world = _check_ranks(checked)
    if old_world == world_size:
        return checked_state(states[rank], members, order, reweight)
    epoch = checked[0]["epoch"]
    reshards = {int(state.get("reshards", 0)) for state in checked}
    if len(reshards) > 1:
        raise ArgumentValueError(
            f"MixedStream.load_state_dict: the states were taken after {sorted(reshards)} reshards; "
            "every rank of one world has the same. Pass the states of one checkpoint of one run."
        )
    sources = {m.name: _source(m, [state["sources"].get(m.name) for state in checked], epoch, old_world)
               for m in members}
    drawn = max(int(state.get("drawn", state["draws"])) for state in checked)
    return {"epoch": epoch, "draws": 0, "drawn": drawn, "reshards": reshards.pop() + 1, "sources": sources}


def _check_ranks(states: list[dict[str, Any]]) -> int:
    """The old world's size, where ``states`` holds each of its ranks once, in rank order, all
    in one epoch; else an error naming what does not fit."""
    worlds = [state["order"].get("world_size") for state in states]
    world = worlds[0]
    if any(size != world for size in worlds) or len(states) != world:
        raise ArgumentValueError(
            f"MixedStream.load_state_dict: the list holds {len(states)} states, saved by worlds of "
            f"{sorted(set(map(str, worlds)))} ranks; pass one state per rank of the world that saved "
            "them, all of the same checkpoint."
        )
    ranks = [state["order"].get("rank") for state in states]
    if ranks != list(range(world)):
        raise ArgumentValueError(
            f"MixedStream.load_state_dict: the states are of the ranks {ranks}, in that order; pass "
            f"them in rank order, 0 to {world - 1} (all_gather_object gives that order)."
        )
    epochs = [state["epoch"] for state in states]
    if len(set(epochs)) > 1:
        raise ArgumentValueError(
            f"MixedStream.load_state_dict: the states are positions in the epochs {epochs} (by rank); "
            "a reshard goes on with one epoch's remaining items. Pass the states of one checkpoint, "
            "taken at the same step on every rank."
        )
    return int(world)


def _source(member: Member, saved: list[Mapping[str, Any] | None], epoch: int, old_world: int) -> dict[str, Any]:
    """One source's start on the new rank, from its entry in each old rank's state (None: that
    rank had not begun the epoch)."""
    entries: list[dict[str, Any]] = [
        dict(entry) if entry is not None else
        {"epoch": epoch, "taken": 0, "delivered": 0, "exhausted": False, "state": None} for entry in saved
    ]
    epochs = sorted({int(entry["epoch"]) for entry in entries})
    if len(epochs) > 1:
        raise ArgumentValueError(
            f"MixedStream.load_state_dict: source {member.name!r} is in the source epochs {epochs} on "
            "the old ranks (stop='never' moves each rank's source on when its share runs out); a "
            "reshard goes on with one source epoch's remaining items. Resume on the world that "
            "saved the states, or start the epoch afresh."
        )
    layouts = {repr(entry.get("layout", [])) for entry in entries}
    if len(layouts) > 1:
        raise ArgumentValueError(
            f"MixedStream.load_state_dict: the old ranks' states cut source {member.name!r} in "
            "different ways (they come from different reshards); pass the states of one checkpoint."
        )
    started = {"epoch": epochs[0], "taken": 0, "delivered": 0}
    if all(entry["exhausted"] for entry in entries):
        return {**started, "exhausted": True, "state": None}
    if member.is_map:
        layers = [*entries[0].get("layout", []), [old_world, [int(entry["taken"]) for entry in entries]]]
        return {**started, "exhausted": False, "state": None, "layout": layers}
    if not any(entry["taken"] or entry["exhausted"] for entry in entries) and all(
            entry["state"] is None for entry in entries):
        return {**started, "exhausted": False, "state": None}  # no old rank had read it: afresh
    lists = member.keeps_state and getattr(member.source, "loads_rank_states", False) is True
    if not lists or any(entry["state"] is None for entry in entries):
        raise ArgumentValueError(
            f"MixedStream.load_state_dict: source {member.name!r} is a stream without a state of its "
            "own on every old rank that loads on another world (a load_state_dict() that takes the "
            "list of every rank's states, loads_rank_states=True), or one rank had not begun the "
            "epoch, so where its rows stood on each rank is not known here. Resume on the world "
            "that saved the states, or use a stream that does (ParquetStream, ArrowStream, TarStream)."
        )
    return {**started, "exhausted": False, "state": [entry["state"] for entry in entries]}
