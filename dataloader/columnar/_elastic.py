"""A columnar stream's saved states on another world size: the checks, and the history they carry.

``load_state_dict`` takes one state (this rank's, saved on this world) or the
list of every rank's states of the saving world. The list is checked to be
one run's (every order field but ``world_size``/``rank`` equal to the
loader's, ranks ``0..W-1`` in order, one epoch, one history) and becomes a
:class:`~._planner.Reshard`. A state carries its run's reshards as
``"reshards"``, plain JSON (a few integers per old rank), so a state saved in
or after a resharded epoch rebuilds its plan anywhere.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from .._order_state import check_order
from .._validate import check_non_negative_int
from ..errors import ArgumentValueError
from ._planner import Reshard

_WORLD = ("world_size", "rank")


def check_state(kind: str, state: Any, mine: Mapping[str, Any], why: Mapping[str, str], where: str = "the state") -> None:
    """Refuse ``state`` unless it is a state of a stream like this one (``mine``: this stream's
    order); its world and rank are checked apart, by :func:`check_world`."""
    if not (isinstance(state, Mapping) and {"epoch", "rows", "order"} <= set(state)):
        raise ArgumentValueError(
            f"{kind}.load_state_dict: {where} must be what a {kind}'s state_dict() returned, a "
            f"dict of 'epoch', 'rows' and 'order'; got {state!r}. (A state saved by an older "
            "version holds no 'order': start the epoch afresh.)"
        )
    saved = state["order"]
    theirs = {key: saved.get(key) for key in _WORLD} if isinstance(saved, Mapping) else {}
    check_order(kind, "stream", saved, {**mine, **theirs}, why)


def check_world(kind: str, state: Mapping[str, Any], mine: Mapping[str, Any]) -> None:
    """Refuse one rank's state saved on another world or by another rank: the list of every
    rank's states is what loads there."""
    for key in _WORLD:
        theirs, value = state["order"].get(key), mine[key]
        if theirs != value:
            raise ArgumentValueError(
                f"{kind}.load_state_dict: the state was saved by a stream with {key}={theirs!r}; this "
                f"stream has {key}={value!r}, and one rank's state does not say where the other ranks "
                "stand. Pass the list of every rank's state of the saving run, in rank order "
                "(load_state_dict([state of rank 0, ..., state of rank W-1]), gathered with "
                "all_gather_object), or start the stream afresh."
            )


def gather(kind: str, states: Sequence[Any], mine: Mapping[str, Any], why: Mapping[str, str]) -> int:
    """Check ``states`` to be every rank's state of one run, in rank order; its world size."""
    if not states:
        raise ArgumentValueError(
            f"{kind}.load_state_dict: got an empty list of states. Pass every rank's state_dict() "
            "of the saving run, in rank order, or one state."
        )
    for index, state in enumerate(states):
        check_state(kind, state, mine, why, f"states[{index}]")
    world = states[0]["order"].get("world_size")
    if len(states) != world:
        raise ArgumentValueError(
            f"{kind}.load_state_dict: got {len(states)} states, but they were saved by a world of "
            f"world_size={world!r} ranks. Pass the state of every rank of the saving run, in rank order."
        )
    for index, state in enumerate(states):
        order = state["order"]
        if (order.get("world_size"), order.get("rank")) != (world, index):
            raise ArgumentValueError(
                f"{kind}.load_state_dict: states[{index}] was saved by rank {order.get('rank')!r} of "
                f"world_size={order.get('world_size')!r}; the list must hold the states of ranks "
                f"0..{world - 1} of one world in rank order. Sort them by rank (all_gather_object keeps it)."
            )
    _agree(kind, states, "epoch", "the ranks must be in the same epoch (take the states at the same step)")
    _agree(kind, states, "reshards", "they must come from one run")
    return world


def _agree(kind: str, states: Sequence[Mapping[str, Any]], key: str, why: str) -> None:
    first = states[0].get(key)
    for index, state in enumerate(states):
        if state.get(key) != first:
            raise ArgumentValueError(
                f"{kind}.load_state_dict: states[{index}] has {key}={state.get(key)!r} but states[0] has "
                f"{key}={first!r}; {why}. Pass the states every rank's stream returned at one step."
            )


def history_of(kind: str, state: Mapping[str, Any]) -> tuple[Reshard, ...]:
    """The reshards a state carries (none: a run that never changed its world)."""
    saved = state.get("reshards", [])
    try:
        history = tuple(
            Reshard(check_non_negative_int("epoch", step["epoch"]), check_non_negative_int("world_size", step["world_size"]),
                    tuple(check_non_negative_int("rows", rows) for rows in step["rows"]))
            for step in saved
        )
    except (TypeError, KeyError, ArgumentValueError) as error:
        raise ArgumentValueError(
            f"{kind}.load_state_dict: the state's 'reshards' must be a list of {{'epoch', 'world_size', "
            f"'rows'}} as state_dict() returned it; got {saved!r} ({error}). Pass the state unchanged."
        ) from error
    if any(len(step.rows) != step.world_size or step.world_size < 1 for step in history):
        raise ArgumentValueError(
            f"{kind}.load_state_dict: each entry of the state's 'reshards' must hold one row count per rank "
            f"of its world_size; got {saved!r}. Pass the state unchanged."
        )
    return history


def history_json(history: Sequence[Reshard]) -> list[dict[str, Any]]:
    """``history`` as a state carries it."""
    return [{"epoch": step.epoch, "world_size": step.world_size, "rows": list(step.rows)} for step in history]


def kept(history: Sequence[Reshard], epoch: int, carry: bool) -> tuple[Reshard, ...]:
    """What of ``history`` still decides epoch ``epoch`` on: with ``carry`` all of it (each epoch
    starts with the one before's surplus), otherwise that epoch's reshards."""
    return tuple(history) if carry else tuple(step for step in history if step.epoch >= epoch)
